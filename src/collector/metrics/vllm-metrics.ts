// The vLLM /metrics series the collector reads, picked out of a scrape per engine (DP rank).
import type { PromSample } from './prom-text.js';

/**
 * The vLLM /metrics series the collector uses (docs/collector.md#vllm-metrics), per engine (= DP rank, label
 * `engine`). Counters are cumulative; null when the pod does not expose the series.
 */
export interface EngineMetrics {
  running: number | null;
  waiting: number | null;
  /** 0..1 */
  kvUsage: number | null;
  prefixQueries: number | null;
  prefixHits: number | null;
  promptTokens: number | null;
  /** request_prefill_time_seconds histogram: Σ seconds and number of requests. */
  prefillTimeSum: number | null;
  prefillTimeCount: number | null;
  /** request_prefill_kv_computed_tokens histogram (newer vLLM): Σ uncached tokens prefilled. */
  computedTokensSum: number | null;
  computedTokensCount: number | null;
  /** request_prompt_tokens histogram: prompt tokens of finished requests (recorded with the prefill time). */
  finishedPromptTokensSum: number | null;
  finishedPromptTokensCount: number | null;
  /** request_generation_tokens histogram: output tokens of finished requests. */
  finishedGenerationTokensSum: number | null;
  finishedGenerationTokensCount: number | null;
  /** iteration_tokens_total histogram: tokens per engine step with output, and the number of such steps. */
  iterationTokensSum: number | null;
  iterationTokensCount: number | null;
  /** inter_token_latency_seconds (older: time_per_output_token_seconds). */
  itlSum: number | null;
  itlCount: number | null;
}

export interface PodMetrics {
  /** By `engine` label ('' when absent). */
  engines: Map<string, EngineMetrics>;
  /** From vllm:cache_config_info's labels. */
  blockSize: number | null;
  numGpuBlocks: number | null;
  /** enable_prefix_caching ("True"/"False", Python's str of the flag); null when not shown. */
  prefixCaching: boolean | null;
  /** process_start_time_seconds: changes when the server restarts. */
  processStartTimeSec: number | null;
}

type Field = keyof EngineMetrics;

/** How much a series moved from scrape `a` to scrape `b`; null when either lacks it. */
export function metricDelta(a: EngineMetrics, b: EngineMetrics, k: Field): number | null {
  const x = a[k];
  const y = b[k];
  return x === null || y === null ? null : y - x;
}

/** Exposed name → field; the first name listed wins over later (deprecated) aliases. */
const SERIES: [Field, string[]][] = [
  ['running', ['vllm:num_requests_running']],
  ['waiting', ['vllm:num_requests_waiting']],
  ['kvUsage', ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc']],
  ['prefixQueries', ['vllm:prefix_cache_queries_total', 'vllm:gpu_prefix_cache_queries_total']],
  ['prefixHits', ['vllm:prefix_cache_hits_total', 'vllm:gpu_prefix_cache_hits_total']],
  ['promptTokens', ['vllm:prompt_tokens_total']],
  ['prefillTimeSum', ['vllm:request_prefill_time_seconds_sum']],
  ['prefillTimeCount', ['vllm:request_prefill_time_seconds_count']],
  ['computedTokensSum', ['vllm:request_prefill_kv_computed_tokens_sum']],
  ['computedTokensCount', ['vllm:request_prefill_kv_computed_tokens_count']],
  ['finishedPromptTokensSum', ['vllm:request_prompt_tokens_sum']],
  ['finishedPromptTokensCount', ['vllm:request_prompt_tokens_count']],
  ['finishedGenerationTokensSum', ['vllm:request_generation_tokens_sum']],
  ['finishedGenerationTokensCount', ['vllm:request_generation_tokens_count']],
  ['iterationTokensSum', ['vllm:iteration_tokens_total_sum']],
  ['iterationTokensCount', ['vllm:iteration_tokens_total_count']],
  ['itlSum', ['vllm:inter_token_latency_seconds_sum', 'vllm:time_per_output_token_seconds_sum']],
  ['itlCount', ['vllm:inter_token_latency_seconds_count', 'vllm:time_per_output_token_seconds_count']],
];

const LOOKUP = new Map<string, { field: Field; rank: number }>();
for (const [field, names] of SERIES) names.forEach((n, rank) => LOOKUP.set(n, { field, rank }));

function emptyEngine(): EngineMetrics {
  return {
    running: null,
    waiting: null,
    kvUsage: null,
    prefixQueries: null,
    prefixHits: null,
    promptTokens: null,
    prefillTimeSum: null,
    prefillTimeCount: null,
    computedTokensSum: null,
    computedTokensCount: null,
    finishedPromptTokensSum: null,
    finishedPromptTokensCount: null,
    finishedGenerationTokensSum: null,
    finishedGenerationTokensCount: null,
    iterationTokensSum: null,
    iterationTokensCount: null,
    itlSum: null,
    itlCount: null,
  };
}

function intLabel(v: string | undefined): number | null {
  if (v === undefined) return null;
  const n = Number(v);
  return Number.isInteger(n) && n > 0 ? n : null;
}

function boolLabel(v: string | undefined): boolean | null {
  const t = v?.trim().toLowerCase();
  return t === 'true' ? true : t === 'false' ? false : null;
}

/** Picks the series we use out of a scrape. Series split by other labels (model_name, LoRA) are summed. */
export function extractVllmMetrics(samples: readonly PromSample[]): PodMetrics {
  const engines = new Map<string, EngineMetrics>();
  const ranks = new Map<string, number>();
  let blockSize: number | null = null;
  let numGpuBlocks: number | null = null;
  let prefixCaching: boolean | null = null;
  let processStartTimeSec: number | null = null;
  for (const s of samples) {
    if (s.name === 'vllm:cache_config_info') {
      blockSize ??= intLabel(s.labels.block_size);
      numGpuBlocks ??= intLabel(s.labels.num_gpu_blocks);
      prefixCaching ??= boolLabel(s.labels.enable_prefix_caching);
      continue;
    }
    if (s.name === 'process_start_time_seconds') {
      processStartTimeSec = s.value;
      continue;
    }
    const hit = LOOKUP.get(s.name);
    if (hit === undefined || !Number.isFinite(s.value)) continue;
    const engine = s.labels.engine ?? '';
    let m = engines.get(engine);
    if (m === undefined) engines.set(engine, (m = emptyEngine()));
    const slot = `${engine}\u0000${hit.field}`;
    const prev = ranks.get(slot);
    if (prev !== undefined && prev < hit.rank) continue; // a preferred name already filled it
    if (prev !== undefined && prev > hit.rank) m[hit.field] = null; // replace a deprecated alias
    ranks.set(slot, hit.rank);
    m[hit.field] = (m[hit.field] ?? 0) + s.value;
  }
  return { engines, blockSize, numGpuBlocks, prefixCaching, processStartTimeSec };
}

/** One engine's KV cache in tokens (cache_config_info), the pod's block size if it gives none; null unknown. */
export function engineKvCapacity(pod: PodMetrics, fallbackBlockSize: number): number | null {
  return pod.numGpuBlocks === null ? null : pod.numGpuBlocks * (pod.blockSize ?? fallbackBlockSize);
}

/** The KV cache behind engineView(pod, rank): one engine's, or for the whole pod all its engines'. */
export function viewKvCapacity(
  pod: PodMetrics,
  rank: number | null,
  fallbackBlockSize: number,
): number | null {
  const one = engineKvCapacity(pod, fallbackBlockSize);
  return one === null || rank !== null ? one : one * Math.max(1, pod.engines.size);
}

/**
 * The metrics of one DP rank (engine label = rank), or of the whole pod when `rank` is null: gauges and
 * counters summed over engines, KV usage averaged.
 */
export function engineView(pod: PodMetrics, rank: number | null): EngineMetrics | null {
  if (rank !== null) return pod.engines.get(String(rank)) ?? null;
  if (pod.engines.size === 0) return null;
  if (pod.engines.size === 1) return pod.engines.values().next().value!;
  const out = emptyEngine();
  let usageN = 0;
  for (const m of pod.engines.values())
    for (const k of Object.keys(out) as Field[]) {
      const v = m[k];
      if (v === null) continue;
      out[k] = (out[k] ?? 0) + v;
      if (k === 'kvUsage') usageN++;
    }
  if (out.kvUsage !== null && usageN > 0) out.kvUsage /= usageN;
  return out;
}
