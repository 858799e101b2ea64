// vLLM's Prometheus metrics for one emulated pod: same names, labels, help texts and buckets.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { EngineOutcome, FinishedRequest } from '../engine/types.js';

/**
 * vLLM's Prometheus metrics (vllm/v1/metrics/loggers.py, docs/emulator.md "Metrics") for one pod: same names,
 * types, help texts, `{engine, model_name}` labels, `_total` counters and bucket lists. Times are exposed in
 * wall-clock seconds (engine ms divided by the time scale), as a pod that fast would report them.
 */

const TTFT_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
  80.0, 160.0, 640.0, 2560.0,
];
const TPOT_BUCKETS = [
  0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
];
const LATENCY_BUCKETS = [
  0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
  960.0, 1920.0, 7680.0,
];
const ITERATION_BUCKETS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384];

/** vLLM build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, … up to max. */
export function buckets125(max: number): number[] {
  const out: number[] = [];
  for (let e = 1; ; e *= 10)
    for (const m of [1, 2, 5]) {
      if (m * e > max) return out;
      out.push(m * e);
    }
}

export interface VllmMetricsOptions {
  modelName: string;
  /** DP ranks served by this pod (the `engine` label). */
  engineIndexes: number[];
  maxModelLen: number;
  blockSize: number;
  numGpuBlocks: number;
  /** Engine milliseconds → exposed seconds (divides by the time scale). */
  msToSeconds: (ms: number) => number;
  hashAlgo: string;
}

const FINISH_REASONS = ['stop', 'length', 'abort'] as const;
/**
 * vLLM's PromptTokenStats.ALL_SOURCES (vllm/v1/metrics/stats.py): PrometheusStatLogger creates a
 * prompt_tokens_by_source series for each, so external_kv_transfer shows 0 here (no KV connectors).
 */
const PROMPT_TOKEN_SOURCES = ['local_compute', 'local_cache_hit', 'external_kv_transfer'] as const;
const L = ['engine', 'model_name'] as const;
type Labels = Record<(typeof L)[number], string>;

export class VllmMetrics {
  readonly registry = new Registry();
  readonly #o: VllmMetricsOptions;
  readonly #running: Gauge<(typeof L)[number]>;
  readonly #waiting: Gauge<(typeof L)[number]>;
  readonly #kvUsage: Gauge<(typeof L)[number]>;
  readonly #counters: Record<string, Counter<(typeof L)[number]>>;
  readonly #success: Counter<(typeof L)[number] | 'finished_reason'>;
  readonly #bySource: Counter<(typeof L)[number] | 'source'>;
  readonly #hist: Record<string, Histogram<(typeof L)[number]>>;
  readonly #startTime: Gauge;

  constructor(o: VllmMetricsOptions) {
    this.#o = o;
    const registers = [this.registry];
    const gauge = (name: string, help: string) => new Gauge({ name, help, labelNames: L, registers });
    const counter = (name: string, help: string) => new Counter({ name, help, labelNames: L, registers });
    const hist = (name: string, help: string, buckets: number[]) =>
      new Histogram({ name, help, labelNames: L, buckets, registers });

    this.#running = gauge('vllm:num_requests_running', 'Number of requests in model execution batches.');
    this.#waiting = gauge('vllm:num_requests_waiting', 'Number of requests waiting to be processed.');
    this.#kvUsage = gauge('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.');
    this.#counters = {
      queries: counter(
        'vllm:prefix_cache_queries_total',
        'Prefix cache queries, in terms of number of queried tokens.',
      ),
      hits: counter(
        'vllm:prefix_cache_hits_total',
        'Prefix cache hits, in terms of number of cached tokens.',
      ),
      preemptions: counter('vllm:num_preemptions_total', 'Cumulative number of preemption from the engine.'),
      prompt: counter('vllm:prompt_tokens_total', 'Number of prefill tokens processed.'),
      cached: counter(
        'vllm:prompt_tokens_cached_total',
        'Number of cached prompt tokens (local + external).',
      ),
      generation: counter('vllm:generation_tokens_total', 'Number of generation tokens processed.'),
    };
    this.#success = new Counter({
      name: 'vllm:request_success_total',
      help: 'Count of successfully processed requests.',
      labelNames: [...L, 'finished_reason'],
      registers,
    });
    this.#bySource = new Counter({
      name: 'vllm:prompt_tokens_by_source_total',
      help: 'Number of prompt tokens by source.',
      labelNames: [...L, 'source'],
      registers,
    });
    const tokenBuckets = buckets125(o.maxModelLen);
    this.#hist = {
      iteration: hist(
        'vllm:iteration_tokens_total',
        'Histogram of number of tokens per engine_step.',
        ITERATION_BUCKETS,
      ),
      ttft: hist(
        'vllm:time_to_first_token_seconds',
        'Histogram of time to first token in seconds.',
        TTFT_BUCKETS,
      ),
      itl: hist(
        'vllm:inter_token_latency_seconds',
        'Histogram of inter-token latency in seconds.',
        TPOT_BUCKETS,
      ),
      tpot: hist(
        'vllm:request_time_per_output_token_seconds',
        'Histogram of time_per_output_token_seconds per request.',
        TPOT_BUCKETS,
      ),
      e2e: hist(
        'vllm:e2e_request_latency_seconds',
        'Histogram of e2e request latency in seconds.',
        LATENCY_BUCKETS,
      ),
      queue: hist(
        'vllm:request_queue_time_seconds',
        'Histogram of time spent in WAITING phase for request.',
        LATENCY_BUCKETS,
      ),
      inference: hist(
        'vllm:request_inference_time_seconds',
        'Histogram of time spent in RUNNING phase for request.',
        LATENCY_BUCKETS,
      ),
      prefill: hist(
        'vllm:request_prefill_time_seconds',
        'Histogram of time spent in PREFILL phase for request.',
        LATENCY_BUCKETS,
      ),
      decode: hist(
        'vllm:request_decode_time_seconds',
        'Histogram of time spent in DECODE phase for request.',
        LATENCY_BUCKETS,
      ),
      promptTokens: hist('vllm:request_prompt_tokens', 'Number of prefill tokens processed.', tokenBuckets),
      generationTokens: hist(
        'vllm:request_generation_tokens',
        'Number of generation tokens processed.',
        tokenBuckets,
      ),
      maxTokens: hist(
        'vllm:request_params_max_tokens',
        'Histogram of the max_tokens request parameter.',
        tokenBuckets,
      ),
      maxGeneration: hist(
        'vllm:request_max_num_generation_tokens',
        'Histogram of maximum number of requested generation tokens.',
        tokenBuckets,
      ),
      computed: hist(
        'vllm:request_prefill_kv_computed_tokens',
        'Histogram of new KV tokens computed during prefill (excluding cached tokens).',
        tokenBuckets,
      ),
    };
    const info = new Gauge({
      name: 'vllm:cache_config_info',
      help: 'Information of the LLMEngine CacheConfig',
      labelNames: [
        'block_size',
        'cache_dtype',
        'calculate_kv_scales',
        'cpu_offload_gb',
        'enable_prefix_caching',
        'engine',
        'gpu_memory_utilization',
        'is_attention_free',
        'num_cpu_blocks',
        'num_gpu_blocks',
        'num_gpu_blocks_override',
        'prefix_caching_hash_algo',
        'sliding_window',
        'swap_space',
      ],
      registers,
    });
    this.#startTime = new Gauge({
      name: 'process_start_time_seconds',
      help: 'Start time of the process since unix epoch in seconds.',
      registers,
    });
    for (const i of o.engineIndexes) {
      const labels = this.#labels(i);
      for (const g of [this.#running, this.#waiting, this.#kvUsage]) g.set(labels, 0);
      for (const c of Object.values(this.#counters)) c.inc(labels, 0);
      for (const reason of FINISH_REASONS) this.#success.inc({ ...labels, finished_reason: reason }, 0);
      for (const source of PROMPT_TOKEN_SOURCES) this.#bySource.inc({ ...labels, source }, 0);
      for (const h of Object.values(this.#hist)) h.zero(labels);
      info.set(
        {
          block_size: String(o.blockSize),
          cache_dtype: 'auto',
          calculate_kv_scales: 'False',
          cpu_offload_gb: '0',
          enable_prefix_caching: 'True',
          engine: String(i),
          gpu_memory_utilization: '0.9',
          is_attention_free: 'False',
          num_cpu_blocks: 'None',
          num_gpu_blocks: String(o.numGpuBlocks),
          num_gpu_blocks_override: 'None',
          prefix_caching_hash_algo: o.hashAlgo,
          sliding_window: 'None',
          swap_space: '4',
        },
        1,
      );
    }
    this.setStartTime(Date.now() / 1000);
  }

  #labels(engine: number): Labels {
    return { engine: String(engine), model_name: this.#o.modelName };
  }

  /** A restart (emulator/restart) changes the start time, as a restarted vLLM process would. */
  setStartTime(epochSeconds: number): void {
    this.#startTime.set(epochSeconds);
  }

  /** Applies one engine outcome (vLLM records SchedulerStats and IterationStats once per step). */
  record(engine: number, o: EngineOutcome): void {
    const labels = this.#labels(engine);
    const s = this.#o.msToSeconds;
    this.#running.set(labels, o.numRunning);
    this.#waiting.set(labels, o.numWaiting);
    this.#kvUsage.set(labels, o.kvUsage);
    if (o.kind === 'step') {
      let queries = 0;
      let hits = 0;
      for (const a of o.admitted) {
        queries += a.queriedTokens;
        hits += a.cachedTokens;
      }
      this.#counters.queries?.inc(labels, queries);
      this.#counters.hits?.inc(labels, hits);
      this.#counters.preemptions?.inc(labels, o.preempted.length);
      let generated = 0;
      let prompted = 0;
      for (const t of o.tokens) {
        generated += t.tokenIds.length;
        if (t.first) {
          prompted += t.promptTokens;
          this.#counters.prompt?.inc(labels, t.promptTokens);
          this.#counters.cached?.inc(labels, t.cachedTokens);
          this.#bySource.inc({ ...labels, source: 'local_compute' }, t.promptTokens - t.cachedTokens);
          this.#bySource.inc({ ...labels, source: 'local_cache_hit' }, t.cachedTokens);
          this.#hist.ttft?.observe(labels, s(t.latencyMs));
        } else this.#hist.itl?.observe(labels, s(t.latencyMs));
      }
      this.#counters.generation?.inc(labels, generated);
      // vLLM's IterationStats: only a step with outputs, counting each finished prefill's whole prompt (not
      // the tokens scheduled: a prefill chunk that gives no token is not seen).
      if (o.tokens.length > 0) this.#hist.iteration?.observe(labels, prompted + generated);
    }
    for (const f of o.finished) this.#recordFinished(labels, f);
  }

  #recordFinished(labels: Labels, f: FinishedRequest): void {
    const s = this.#o.msToSeconds;
    const h = this.#hist;
    this.#success.inc({ ...labels, finished_reason: f.reason });
    h.e2e?.observe(labels, s(f.finishedMs - f.arrivalMs));
    if (f.firstScheduledMs !== null) {
      h.queue?.observe(labels, s(f.firstScheduledMs - f.arrivalMs));
      const end = f.lastTokenMs ?? f.finishedMs;
      h.inference?.observe(labels, s(end - f.firstScheduledMs));
      if (f.firstTokenMs !== null) {
        h.prefill?.observe(labels, s(f.firstTokenMs - f.firstScheduledMs));
        h.decode?.observe(labels, s(end - f.firstTokenMs));
        if (f.outputTokens > 1) h.tpot?.observe(labels, s((end - f.firstTokenMs) / (f.outputTokens - 1)));
        h.computed?.observe(labels, f.promptTokens - f.cachedTokens);
      }
    }
    h.promptTokens?.observe(labels, f.promptTokens);
    h.generationTokens?.observe(labels, f.outputTokens);
    h.maxTokens?.observe(labels, f.maxTokens);
    h.maxGeneration?.observe(labels, f.maxTokens);
  }

  async render(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
