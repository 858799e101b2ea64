/** Domain types shared by the router core, the index, the collector and the plugin. */

/** Our 64-bit chained block key, as 16 lowercase hex digits. Never vLLM's own hash (see VllmBlockHash). */
export type BlockKey = string & { readonly __brand: 'BlockKey' };

/** vLLM's opaque block hash from KV events, normalised to a string (decimal uint64, or hex of bytes). */
export type VllmBlockHash = string & { readonly __brand: 'VllmBlockHash' };

export type PodId = string;

/**
 * A data-parallel rank of a pod is indexed, and routed to, as `<pod id>@dp<rank>`: its own KV cache and
 * load at the pod's address. Pod ids never contain `@` (config pattern, Kubernetes names).
 */
export function dataParallelPodId(podId: PodId, rank: number): PodId {
  return `${podId}@dp${rank}`;
}

/** The DP rank an index pod id names, or null for a pod with one rank. */
export function dataParallelRankOf(podId: PodId): number | null {
  const m = /@dp(\d+)$/.exec(podId);
  return m ? Number(m[1]) : null;
}

/** Storage tiers, fastest first. A prefix counted for a tier may use that tier or any faster one. */
export const TIERS = ['GPU', 'CPU', 'STORAGE'] as const;
export type Tier = (typeof TIERS)[number];

export function tierRank(t: Tier): number {
  return TIERS.indexOf(t);
}

/** Per-pod TTFT model coefficients. Units are in the names. */
export interface Calibration {
  /** Fixed cost per request: HTTP, scheduling, sampling the first token. */
  overheadMs: number;
  /** Linear prefill cost per uncached prompt token. */
  prefillMsPerToken: number;
  /** Attention term: cost per (new token × context token), i.e. quadratic in context. */
  attentionMsPerToken2: number;
  /** Cost of loading one token's KV from the CPU tier into GPU memory. */
  cpuLoadMsPerToken: number;
  /** Cost of one engine decode step that running requests impose on a newcomer's prefill chunks. */
  decodeStepMs: number;
  /** Engine token budget per step (max_num_batched_tokens). */
  maxBatchedTokens: number;
}

/**
 * Decode steps measured in a pod's decode-only scrape intervals (collector/metrics/decode-fit.ts): the mean
 * step at the mean context decoding in them, and the line d0 + k·context through them once they spread enough
 * in context for its slope to be sure.
 */
export interface DecodeSteps {
  /** Mean context tokens decoding at once (Σ over the running requests). */
  contextTokens: number;
  stepMs: number;
  /** Decode-only intervals behind the estimate. */
  intervals: number;
  line: { baseMs: number; msPerContextToken: number } | null;
}

/** What the index knows about a pod besides its blocks. Written by the collector. */
export interface PodState {
  podId: PodId;
  model: string;
  /** host:port the gateway sends requests to. */
  address: string;
  healthy: boolean;
  running: number;
  waiting: number;
  /** 0..1, vllm:kv_cache_usage_perc. */
  kvUsage: number;
  /** KV cache size in tokens (vllm:cache_config_info num_gpu_blocks × block size); 0 when unknown. */
  kvCapacityTokens: number;
  /** Mean uncached prompt tokens of a queued request, from metrics (0 when unknown). */
  meanQueuedPrefillTokens: number;
  /** The pod's context window in tokens (vLLM's max_model_len, from its /v1/models); 0 when unknown. */
  maxModelLen: number;
  calibration: Calibration | null;
  /** The decode step measured from /metrics (the ITL guard's model); null until measured. */
  decodeSteps: DecodeSteps | null;
  /** Epoch milliseconds; 0 when never seen. */
  lastEventAtMs: number;
  lastScrapeAtMs: number;
  /** True while the collector knows its view of this pod's blocks is incomplete (gap not yet repaired). */
  resyncing: boolean;
  /**
   * When the collector last cleared this pod's blocks without (yet) replaying the pod's events from its
   * engine's first batch (epoch ms): blocks the pod stored before then may be missing from the index until a
   * request reuses them with vLLM's full KV reports (plugin `kv_reuse_reports_ms`). 0: the index has every
   * event of the pod's engine process, or the collector never said.
   */
  partialSinceMs: number;
}

/** Cumulative prefix lengths in blocks: prefixBlocks.CPU counts blocks held in GPU or CPU, and so on. */
export type PrefixBlocks = Record<Tier, number>;

/** One pod as seen by a lookup: its longest cached prefix per tier plus its state. */
export interface PodLookup {
  state: PodState;
  prefixBlocks: PrefixBlocks;
}

export interface LookupResult {
  pods: PodLookup[];
}

/** A recent routing decision not yet visible in the pod's metrics. */
export interface Reservation {
  podId: PodId;
  atMs: number;
  uncachedTokens: number;
  promptTokens: number;
}
