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
        },
      },
    },
  },
}
