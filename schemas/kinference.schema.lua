-- Generated from src/config/plugin-config.ts by scripts/gen-schemas.ts: do not edit.
-- Kong schema of the kinference external plugin, for control planes that need a Lua schema.
local typedefs = require "kong.db.schema.typedefs"

return {
  name = "kinference",
  fields = {
    { protocols = typedefs.protocols_http },
    {
      config = {
        type = "record",
        fields = {
          {
            redis_url = {
              type = "string",
              required = true,
              default = "redis://127.0.0.1:6379/0",
              match_any = {
                patterns = {
                  "^rediss?://",
                },
                err = "expected a Redis URL: redis://[user:password@]host:port/db, or rediss://… for TLS",
              },
              referenceable = true,
              encrypted = true,
              description = "Redis holding the KV-location index, as redis://[user:password@]host:port/db, or rediss:// for TLS.",
            },
          },
          {
            redis_cluster = {
              type = "boolean",
              required = true,
              default = false,
              description = "redis_url names one node of a Redis Cluster (any node; the others are found from it). Each model keeps its whole index in one slot, so one shard.",
            },
          },
          {
            redis_cluster_nodes = {
              type = "array",
              required = false,
              len_max = 64,
              elements = {
                type = "string",
                match_any = {
                  patterns = {
                    "^[^: \009\010\011\012\013]+:[0-9][0-9]?[0-9]?[0-9]?[0-9]?$",
                  },
                  err = "expected host:port (e.g. 10.0.0.7:8000; port 1–65535)",
                },
              },
              description = "With redis_cluster: more nodes of the Redis Cluster to start from, as host:port, when the node of redis_url does not answer. User, password and TLS come from redis_url.",
            },
          },
          {
            redis_sentinels = {
              type = "array",
              required = false,
              len_min = 1,
              len_max = 64,
              elements = {
                type = "string",
                match_any = {
                  patterns = {
                    "^[^: \009\010\011\012\013]+:[0-9][0-9]?[0-9]?[0-9]?[0-9]?$",
                  },
                  err = "expected host:port (e.g. 10.0.0.7:8000; port 1–65535)",
                },
              },
              description = "Redis Sentinel: sentinels to ask for the primary of redis_sentinel_master, as host:port; failovers are followed. redis_url then gives only user, password, database and TLS of the data nodes.",
            },
          },
          {
            redis_sentinel_master = {
              type = "string",
              required = false,
              match_any = {
                patterns = {
                  "^[^ \009\010\011\012\013]+$",
                },
                err = "expected the master name the sentinels monitor (sentinel monitor <name> ...)",
              },
              description = "With redis_sentinels: the name the sentinels monitor the primary under (sentinel monitor <name> host port quorum).",
            },
          },
          {
            redis_sentinel_password = {
              type = "string",
              required = false,
              len_min = 1,
              referenceable = true,
              encrypted = true,
              description = "With redis_sentinels: the password of the sentinels themselves (their requirepass), when they have one; the data nodes take theirs from redis_url.",
            },
          },
          {
            redis_sentinel_tls = {
              type = "boolean",
              required = false,
              description = "With redis_sentinels: the sentinels speak TLS, with the redis_tls_* settings of the data nodes. Unset: as redis_url (rediss:// or not).",
            },
          },
          {
            redis_tls_ca_file = {
              type = "string",
              required = false,
              len_min = 1,
              description = "With rediss://: path of a PEM file of the CA certificates that sign the Redis server certificate (an in-cluster Redis with its own CA), trusted in place of the system CAs. Read when the connection is made.",
            },
          },
          {
            redis_tls_cert_file = {
              type = "string",
              required = false,
              len_min = 1,
              description = "With rediss://: path of a PEM client certificate, for a Redis that requires one (tls-auth-clients). Needs redis_tls_key_file.",
            },
          },
          {
            redis_tls_key_file = {
              type = "string",
              required = false,
              len_min = 1,
              description = "With rediss://: path of the PEM private key of redis_tls_cert_file.",
            },
          },
          {
            redis_tls_servername = {
              type = "string",
              required = false,
              len_min = 1,
              description = "With rediss://: the name the Redis server certificate must carry, sent as TLS SNI and checked, when it is not the host of redis_url (an IP address, another DNS name).",
            },
          },
          {
            redis_timeout_ms = {
              type = "integer",
              required = true,
              default = 25,
              between = {
                1,
                10000,
              },
              description = "Budget for the one index lookup per request, in milliseconds; past it the request is routed on load alone.",
            },
          },
          {
            redis_key_prefix = {
              type = "string",
              required = true,
              default = "kinf",
              len_min = 1,
              len_max = 64,
              match_any = {
                patterns = {
                  "^[A-Za-z0-9_.:%-]+$",
                },
                err = "expected 1–64 characters among letters, digits and _ . : -",
              },
              description = "Prefix of every Redis key of the index; the collector must use the same prefix.",
            },
          },
          {
            index = {
              type = "string",
              required = true,
              default = "redis",
              one_of = {
                "redis",
                "memory",
              },
              description = "Where the KV-location index lives: redis (shared with the collector) or memory (tests and single-node demos only).",
            },
          },
          {
            model_pods = {
              type = "map",
              required = false,
              keys = {
                type = "string",
              },
              values = {
                type = "array",
                elements = {
                  type = "string",
                  match_any = {
                    patterns = {
                      "^[^: \009\010\011\012\013]+:[0-9][0-9]?[0-9]?[0-9]?[0-9]?$",
                    },
                    err = "expected host:port (e.g. 10.0.0.7:8000; port 1–65535)",
                  },
                },
              },
              description = "Static fallback pod list per model (model name to host:port list), used when the index has no pods for the model.",
            },
          },
          {
            lora_adapters = {
              type = "map",
              required = false,
              keys = {
                type = "string",
              },
              values = {
                type = "string",
                len_min = 1,
              },
              description = "LoRA adapters served by the pods, as adapter name to base model. A request naming an adapter is routed among the base model pods.",
            },
          },
          {
            tokenizer = {
              type = "string",
              required = true,
              default = "tiktoken:o200k_harmony",
              match_any = {
                patterns = {
                  "^tiktoken:[a-z0-9_]+$",
                  "^hf:[^\010\013]+$",
                },
                err = "expected a tokenizer spec: tiktoken:<encoding> (o200k_harmony, o200k_base, cl100k_base) or hf:<path to tokenizer.json, model directory or Hugging Face model id such as Qwen/Qwen3-8B>",
              },
              description = "Tokenizer matching the served model: tiktoken:<encoding>, or hf:<path to tokenizer.json or model directory> or hf:<Hugging Face model id> (e.g. hf:Qwen/Qwen3-8B, read from the local Hugging Face cache). Must match vLLM or nothing is ever cached. The default fits gpt-oss.",
            },
          },
          {
            chat_template = {
              type = "string",
              required = true,
              default = "harmony",
              match_any = {
                patterns = {
                  "^chatml$",
                  "^harmony$",
                  "^llama3$",
                  "^none$",
                  "^hf:[^\010\013]+$",
                },
                err = "expected a chat template: chatml, harmony, llama3, none, or hf:<path to tokenizer_config.json or .jinja, model directory or Hugging Face model id such as Qwen/Qwen3-8B>",
              },
              description = "Chat template matching the served model: chatml, harmony, llama3, none, or hf:<path to tokenizer_config.json or model directory> or hf:<Hugging Face model id> (from the local Hugging Face cache). The default fits gpt-oss.",
            },
          },
          {
            default_chat_template_kwargs = {
              type = "string",
              required = false,
              len_min = 2,
              description = "The JSON object given to vLLM as --default-chat-template-kwargs (e.g. {\"enable_thinking\": false}), if any: the template gets it under the request's own chat_template_kwargs, as vLLM renders. Only for hf: templates.",
            },
          },
          {
            block_size = {
              type = "integer",
              required = true,
              default = 16,
              between = {
                1,
                4096,
              },
              description = "Tokens per KV-cache block, as vLLM is configured (--block-size, 16 by default).",
            },
          },
          {
            max_prompt_tokens = {
              type = "integer",
              required = true,
              default = 131072,
              between = {
                16,
                4194304,
              },
              description = "Cap on tokenization work per request; longer prompts are routed on their first max_prompt_tokens tokens.",
            },
          },
          {
            max_model_len = {
              type = "map",
              required = false,
              keys = {
                type = "string",
              },
              values = {
                type = "integer",
                between = {
                  16,
                  4194304,
                },
              },
              description = "Context window per model in tokens, as vLLM serves it (--max-model-len): a longer prompt is never tokenized past it and is routed on load alone (context_window_exceeded), since vLLM refuses it. Wins over the pods' own: for a model not listed, the smallest max_model_len its healthy pods report in /v1/models (read by the collector) as the router's last lookup found it, else none (cut at max_prompt_tokens).",
            },
          },
          {
            max_template_messages = {
              type = "integer",
              required = true,
              default = 2048,
              between = {
                1,
                100000,
              },
              description = "Messages a chat template renders at most per request (~40-100 us of CPU each with an hf: template); a request with more is routed on load alone (template_budget_exceeded).",
            },
          },
          {
            max_template_depth = {
              type = "integer",
              required = true,
              default = 64,
              between = {
                4,
                1024,
              },
              description = "Nesting depth of the JSON the chat template renders (tools, tool call arguments, content parts) at most; a deeper request is routed on load alone (template_budget_exceeded).",
            },
          },
          {
            decision_budget_ms = {
              type = "integer",
              required = true,
              default = 500,
              between = {
                10,
                60000,
              },
              description = "Time a decision's template, tokenization and keys may take, ms; past it the request is routed on load alone (decision_budget_exceeded). With decision workers the event loop stops waiting at the budget.",
            },
          },
          {
            decision_workers = {
              type = "integer",
              required = false,
              between = {
                0,
                256,
              },
              description = "Worker threads of the plugin server that render templates, tokenize and hash keys, shared by every config of the process (the first config's setting sizes the pool). Unset: the cores available (os.availableParallelism()). 0: on the event loop.",
            },
          },
          {
            max_body_bytes = {
              type = "integer",
              required = true,
              default = 8388608,
              between = {
                1024,
                268435456,
              },
              description = "Bodies larger than this (by Content-Length) are never fetched by the plugin (the RPC cost grows with size); Kong's target (the service url) is kept. Chunked, compressed and empty bodies are not read either.",
            },
          },
          {
            fallback = {
              type = "string",
              required = true,
              default = "least-loaded",
              one_of = {
                "least-loaded",
                "kong-default",
              },
              description = "What happens when no prediction can be made or no pod is healthy: least-loaded picks the pod with the least work, kong-default leaves the service target.",
            },
          },
          {
            stale_after_ms = {
              type = "integer",
              required = true,
              default = 10000,
              between = {
                100,
                3600000,
              },
              description = "Pod index data older than this (no KV event and no scrape) is stale: its cached-prefix credit is discounted.",
            },
          },
          {
            reservation_ttl_ms = {
              type = "integer",
              required = true,
              default = 15000,
              between = {
                0,
                600000,
              },
              description = "How long the router counts its own recent assignments as queued work on a pod, until the pod's metrics show them, and their prompts as about to be cached there, until the pod's KV events do. 0 turns both off.",
            },
          },
          {
            kv_reuse_reports_ms = {
              type = "integer",
              required = true,
              default = 600000,
              between = {
                0,
                86400000,
              },
              description = "For this long after the collector rebuilt a pod's index without its whole event history (a restart, takeover, Redis data loss), the router credits the pod with prompts it sent there before (its own memory), and requests to the pod ask vLLM to report the cached blocks they reuse (vllm_xargs.kv_cache_report_mode=full, vLLM #45261), so those blocks return to the index. Bodies with their own vllm_xargs are left alone. 0 turns it off.",
            },
          },
          {
            share_reservations = {
              type = "boolean",
              required = true,
              default = true,
              description = "Share this node's reservations (its recent assignments, see reservation_ttl_ms) with the other Kong nodes through the Redis index, and count theirs: nodes then see each other's work in flight. One small Redis write per routed request and one read beside each lookup.",
            },
          },
          {
            shed_ttft_slo_ms = {
              type = "integer",
              required = true,
              default = 0,
              between = {
                0,
                3600000,
              },
              description = "Opt-in load shedding: when every pod is predicted over this TTFT because of its queue (or, with itl_slo_ms, over the ITL guard), answer 429 with Retry-After. 0 disables shedding.",
            },
          },
          {
            itl_slo_ms = {
              type = "integer",
              required = true,
              default = 0,
              between = {
                0,
                60000,
              },
              description = "Opt-in ITL guard: a pod is not given more prefill work than keeps its decoding requests' inter-token latency under this bound (ms); with shed_ttft_slo_ms set, a request no pod can take is answered 429. 0 disables.",
            },
          },
          {
            itl_response_tokens = {
              type = "integer",
              required = true,
              default = 256,
              between = {
                1,
                1024,
              },
              description = "ITL guard: output tokens of a typical answer, for requests without max_tokens. The guard keeps the ITL averaged over an answer this long within the bound.",
            },
          },
          {
            itl_decode_base_ms = {
              type = "number",
              required = true,
              default = 43,
              between = {
                0,
                10000,
              },
              description = "ITL guard model: a decode step of the served model with no context (weights read, scheduling, sampling), ms. The default fits a ~27B FP8 model on an L40S. With itl_decode_from_metrics, used only for a pod the collector has not measured yet, and as the shape to scale through a single measured step.",
            },
          },
          {
            itl_decode_ms_per_1k_context = {
              type = "number",
              required = true,
              default = 0.36,
              between = {
                0,
                1000,
              },
              description = "ITL guard model: time a decode step gains per 1,000 context tokens decoding on the pod (KV read), ms. The default fits a ~27B model with 256 KiB of KV per token on an L40S. With itl_decode_from_metrics, a fallback as itl_decode_base_ms is.",
            },
          },
          {
            itl_decode_from_metrics = {
              type = "boolean",
              required = true,
              default = true,
              description = "ITL guard: use each pod's decode step as the collector measures it from vLLM's /metrics (decode-only scrape intervals) in place of itl_decode_base_ms and itl_decode_ms_per_1k_context, once it has. Off: the configured model everywhere.",
            },
          },
          {
            latency_feedback = {
              type = "boolean",
              required = true,
              default = false,
              description = "Correct each pod's predictions from Kong's measured time to the upstream's first byte. Only when pods send response headers with the first token; vLLM sends them at once, so leave off for vLLM.",
            },
          },
          {
            expose_headers = {
              type = "boolean",
              required = true,
              default = false,
              description = "Add x-kinference-* headers (chosen pod, predicted TTFT, cached tokens) to the upstream request, for debugging.",
            },
          },
          {
            otlp_endpoint = {
              type = "string",
              required = false,
              match_any = {
                patterns = {
                  "^https?://",
                },
                err = "expected an http:// or https:// URL",
              },
              description = "OTLP/HTTP traces endpoint, e.g. http://jaeger:4318/v1/traces. Unset disables tracing at no cost per request.",
            },
          },
          {
            service_name = {
              type = "string",
              required = true,
              default = "kinference",
              len_min = 1,
              description = "OpenTelemetry service.name of the spans the plugin exports.",
            },
          },
          {
            trace_sample_ratio = {
              type = "number",
              required = true,
              default = 1,
              between = {
                0,
                1,
              },
              description = "Fraction of requests without a traceparent whose decision span is exported; a request with one follows its sampled flag (parent-based sampling).",
            },
          },
          {
            policies = {
              type = "record",
              required = false,
              fields = {
                {
                  tenant_from = {
                    type = "array",
                    required = true,
                    default = {
                      "consumer",
                      "consumer_group",
                    },
                    len_min = 1,
                    len_max = 4,
                    elements = {
                      type = "string",
                      one_of = {
                        "consumer",
                        "consumer_group",
                        "header",
                        "user",
                      },
                    },
                    description = "Where a request's tenant comes from, first that names one wins: consumer, consumer_group, header (tenant_header), user (the OpenAI user field).",
                  },
                },
                {
                  tenant_header = {
                    type = "string",
                    required = true,
                    default = "x-tenant-id",
                    len_min = 1,
                    len_max = 128,
                    match_any = {
                      patterns = {
                        "^[A-Za-z0-9!#$%%&'*+.%^_`|~%-]+$",
                      },
                      err = "expected an HTTP header name",
                    },
                    description = "The request header naming the tenant, when tenant_from has header. It never raises the class above what the consumer has.",
                  },
                },
                {
                  default_tenant = {
                    type = "string",
                    required = true,
                    default = "default",
                    len_min = 1,
                    len_max = 128,
                    match_any = {
                      patterns = {
                        "^[A-Za-z0-9_.@:%-]+$",
                      },
                      err = "expected 1–128 characters among letters, digits and _ . @ : -",
                    },
                    description = "The tenant of a request nothing names.",
                  },
                },
                {
                  classes = {
                    type = "array",
                    required = true,
                    default = {
                      {
                        name = "interactive",
                        priority = 100,
                        ttft_objective_ms = 1000,
                        max_wait_ms = 0,
                        reserved_pods = 0,
                      },
                      {
                        name = "standard",
                        priority = 0,
                        ttft_objective_ms = 5000,
                        max_wait_ms = 0,
                        reserved_pods = 0,
                      },
                      {
                        name = "batch",
                        priority = -1,
                        ttft_objective_ms = 60000,
                        max_wait_ms = 5000,
                        reserved_pods = 0,
                      },
                    },
                    len_min = 1,
                    len_max = 16,
                    elements = {
                      type = "record",
                      fields = {
                        {
                          name = {
                            type = "string",
                            required = true,
                            len_min = 1,
                            len_max = 128,
                            match_any = {
                              patterns = {
                                "^[A-Za-z0-9_.@:%-]+$",
                              },
                              err = "expected 1–128 characters among letters, digits and _ . @ : -",
                            },
                            description = "The class name, as tenants[].class and default_class name it (e.g. interactive, batch).",
                          },
                        },
                        {
                          priority = {
                            type = "integer",
                            required = true,
                            between = {
                              -1000,
                              1000,
                            },
                            description = "Higher is served first, strictly between priorities. Negative: sheddable under overload (Gateway API Inference Extension). Zero or more: never shed for overload.",
                          },
                        },
                        {
                          ttft_objective_ms = {
                            type = "integer",
                            required = true,
                            between = {
                              1,
                              3600000,
                            },
                            description = "The TTFT this class is promised (ms). A lower class is not placed where it would push this class past it; a sheddable class is not placed where it would miss it itself (it waits, then is shed).",
                          },
                        },
                        {
                          max_wait_ms = {
                            type = "integer",
                            required = true,
                            default = 0,
                            between = {
                              0,
                              60000,
                            },
                            description = "How long a request of this class may wait in the gateway for capacity under overload before it is shed (sheddable classes) or sent to its best pod anyway (others). 0: no wait.",
                          },
                        },
                        {
                          reserved_pods = {
                            type = "integer",
                            required = true,
                            default = 0,
                            between = {
                              0,
                              64,
                            },
                            description = "Pods kept ready for this class from the start, before it is first served and while it is idle: a lower class is not placed there where it would push this class past its objective. The same pods on every Kong node (a hash of their ids). 0: protected only where served recently.",
                          },
                        },
                      },
                    },
                    description = "The service classes, each with a priority and a TTFT objective.",
                  },
                },
                {
                  default_class = {
                    type = "string",
                    required = true,
                    default = "standard",
                    len_min = 1,
                    len_max = 128,
                    match_any = {
                      patterns = {
                        "^[A-Za-z0-9_.@:%-]+$",
                      },
                      err = "expected 1–128 characters among letters, digits and _ . @ : -",
                    },
                    description = "The class of a tenant no policy gives one.",
                  },
                },
                {
                  tenants = {
                    type = "array",
                    required = true,
                    default = {},
                    len_max = 10000,
                    elements = {
                      type = "record",
                      fields = {
                        {
                          match = {
                            type = "record",
                            required = true,
                            fields = {
                              {
                                consumer = {
                                  type = "string",
                                  required = false,
                                  len_min = 1,
                                  description = "The Kong consumer, by username, custom_id or id.",
                                },
                              },
                              {
                                consumer_group = {
                                  type = "string",
                                  required = false,
                                  len_min = 1,
                                  description = "A consumer group the Kong consumer belongs to, by name.",
                                },
                              },
                              {
                                tenant = {
                                  type = "string",
                                  required = false,
                                  len_min = 1,
                                  description = "The resolved tenant name, whatever source named it.",
                                },
                              },
                            },
                            description = "Which requests a tenant policy applies to: every field given must match.",
                          },
                        },
                        {
                          class = {
                            type = "string",
                            required = false,
                            len_min = 1,
                            len_max = 128,
                            match_any = {
                              patterns = {
                                "^[A-Za-z0-9_.@:%-]+$",
                              },
                              err = "expected 1–128 characters among letters, digits and _ . @ : -",
                            },
                            description = "The service class of the matched tenants (a classes[].name).",
                          },
                        },
                        {
                          max_concurrent = {
                            type = "integer",
                            required = true,
                            default = 0,
                            between = {
                              0,
                              1000000,
                            },
                            description = "Requests of one matched tenant in flight at once, over every Kong node. 0: no cap.",
                          },
                        },
                        {
                          daily_budget = {
                            type = "number",
                            required = true,
                            default = 0,
                            between = {
                              0,
                              1000000000000,
                            },
                            description = "Estimated cost one matched tenant may spend per UTC day, in `currency` (needs prices). 0: no budget.",
                          },
                        },
                      },
                    },
                    description = "Per tenant, consumer or consumer group: its class, concurrent-request cap and daily budget. The first policy that matches applies.",
                  },
                },
                {
                  rate_limits = {
                    type = "array",
                    required = true,
                    default = {},
                    len_max = 1000,
                    elements = {
                      type = "record",
                      fields = {
                        {
                          match = {
                            type = "record",
                            required = true,
                            fields = {
                              {
                                consumer = {
                                  type = "string",
                                  required = false,
                                  len_min = 1,
                                  description = "The Kong consumer, by username, custom_id or id.",
                                },
                              },
                              {
                                consumer_group = {
                                  type = "string",
                                  required = false,
                                  len_min = 1,
                                  description = "A consumer group the Kong consumer belongs to, by name.",
                                },
                              },
                              {
                                tenant = {
                                  type = "string",
                                  required = false,
                                  len_min = 1,
                                  description = "The resolved tenant name, whatever source named it.",
                                },
                              },
                              {
                                model = {
                                  type = "string",
                                  required = false,
                                  len_min = 1,
                                  description = "The model of the request (the base model of a LoRA adapter).",
                                },
                              },
                            },
                            description = "Which requests a rate-limit policy counts: every field given must match; {} is all.",
                          },
                        },
                        {
                          per = {
                            type = "string",
                            required = true,
                            default = "tenant",
                            one_of = {
                              "tenant",
                              "all",
                            },
                            description = "tenant: each matched tenant has its own counters; all: the matched requests share one.",
                          },
                        },
                        {
                          limits = {
                            type = "array",
                            required = true,
                            len_min = 1,
                            len_max = 9,
                            elements = {
                              type = "record",
                              fields = {
                                {
                                  tokens = {
                                    type = "string",
                                    required = true,
                                    one_of = {
                                      "prompt",
                                      "output",
                                      "total",
                                    },
                                    description = "What is counted: prompt tokens (exact at admission), output tokens (reserved from max_tokens, settled at the end) or their total.",
                                  },
                                },
                                {
                                  window = {
                                    type = "string",
                                    required = true,
                                    one_of = {
                                      "minute",
                                      "hour",
                                      "day",
                                    },
                                    description = "The fixed window the limit counts over (UTC minute, hour or day).",
                                  },
                                },
                                {
                                  limit = {
                                    type = "integer",
                                    required = true,
                                    between = {
                                      1,
                                      1000000000000000,
                                    },
                                    description = "Tokens allowed per window.",
                                  },
                                },
                              },
                            },
                            description = "The token limits of this policy; a request must fit every one of them.",
                          },
                        },
                      },
                    },
                    description = "Token rate limits shared by every Kong node through Redis: each a match and its limits; a request must fit every policy that matches.",
                  },
                },
                {
                  default_output_tokens = {
                    type = "integer",
                    required = true,
                    default = 256,
                    between = {
                      1,
                      1048576,
                    },
                    description = "Output tokens reserved at admission for a request without max_tokens (settled when the answer ends).",
                  },
                },
                {
                  on_redis_error = {
                    type = "string",
                    required = true,
                    default = "allow",
                    one_of = {
                      "allow",
                      "deny",
                    },
                    description = "Limits, caps and budgets when Redis cannot be reached: allow (fail open, said once in the log) or deny (429).",
                  },
                },
                {
                  prices = {
                    type = "map",
                    required = false,
                    keys = {
                      type = "string",
                    },
                    values = {
                      type = "record",
                      fields = {
                        {
                          input_per_million = {
                            type = "number",
                            required = false,
                            between = {
                              0,
                              1000000000,
                            },
                            description = "Price of 1M uncached prompt tokens.",
                          },
                        },
                        {
                          cached_input_per_million = {
                            type = "number",
                            required = false,
                            between = {
                              0,
                              1000000000,
                            },
                            description = "Price of 1M prompt tokens served from the KV cache (cache read).",
                          },
                        },
                        {
                          output_per_million = {
                            type = "number",
                            required = false,
                            between = {
                              0,
                              1000000000,
                            },
                            description = "Price of 1M output tokens.",
                          },
                        },
                        {
                          gpu_hour = {
                            type = "number",
                            required = false,
                            between = {
                              0,
                              1000000,
                            },
                            description = "Price of one GPU-hour; per-token prices are derived from the pods' measured prefill and decode speeds where not given.",
                          },
                        },
                        {
                          gpus_per_pod = {
                            type = "integer",
                            required = true,
                            default = 1,
                            between = {
                              1,
                              1024,
                            },
                            description = "GPUs behind one pod (tensor and pipeline parallel), for gpu_hour.",
                          },
                        },
                      },
                    },
                    description = "Prices per model (base model name, or * for any other): per million tokens, or a GPU-hour price.",
                  },
                },
                {
                  currency = {
                    type = "string",
                    required = true,
                    default = "USD",
                    match_any = {
                      patterns = {
                        "^[A-Z][A-Z][A-Z]$",
                      },
                      err = "expected an ISO 4217 currency code such as USD or EUR",
                    },
                    description = "The currency of prices and budgets.",
                  },
                },
                {
                  quote_cost = {
                    type = "boolean",
                    required = true,
                    default = true,
                    description = "Send the predicted cost of each request in an x-kinference-cost-estimate response header (needs prices).",
                  },
                },
                {
                  usage_retention_days = {
                    type = "integer",
                    required = true,
                    default = 35,
                    between = {
                      1,
                      3660,
                    },
                    description = "How long the hourly usage records per tenant and model stay in Redis.",
                  },
                },
              },
              description = "Tenants and policies: service classes, token rate limits, concurrency caps, budgets, prices and usage. Absent: every request alike, as before.",
            },
          },
        },
      },
    },
  },
}
