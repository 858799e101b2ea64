/**
 * Public types of the emulated vLLM V1 engine. The engine is a pure state machine on a clock: callers pass
 * times in (virtual) milliseconds and get back step outcomes; it owns no timers and does no I/O.
 */

/** The engine's own block hash: 32-byte sha256 digest as 64 lowercase hex digits (vLLM `BlockHash`). */
export type EngineBlockHash = string & { readonly __brand: 'EngineBlockHash' };

/** Per-block extra hash keys (vLLM `extra_keys` tuple): LoRA name on every block, cache_salt on block 0. */
export type ExtraKeys = readonly string[];

export interface BlockStoredEvent {
  type: 'BlockStored';
  /** Newly cached full blocks, in prefix order. */
  blockHashes: EngineBlockHash[];
  /** Hash of the block before the first one here; null when the run starts at block 0. */
  parentBlockHash: EngineBlockHash | null;
  /** All tokens of those blocks, concatenated (prompt and output tokens alike). */
  tokenIds: number[];
  blockSize: number;
  loraId: number | null;
  loraName: string | null;
  /** One entry per block in blockHashes (null when the block has no extra keys). */
  extraKeys: (ExtraKeys | null)[];
}

/** Emitted when a cached free block is re-allocated (LRU eviction), one hash per event. */
export interface BlockRemovedEvent {
  type: 'BlockRemoved';
  blockHashes: EngineBlockHash[];
}

export interface AllBlocksClearedEvent {
  type: 'AllBlocksCleared';
}

export type KvCacheEvent = BlockStoredEvent | BlockRemovedEvent | AllBlocksClearedEvent;

/** A request as the API server hands it to the engine core (already tokenized). */
export interface EngineRequestInput {
  /** Unique among live requests of this engine. */
  id: string;
  promptTokenIds: readonly number[];
  /** Output cap (vLLM sampling_params.max_tokens after defaulting). */
  maxTokens: number;
  /** Generate exactly maxTokens; otherwise EOS is sampled with the profile's mean output length. */
  ignoreEos?: boolean;
  /** No EOS before this many output tokens. */
  minTokens?: number;
  loraName?: string | null;
  /** vLLM's numeric LoRA adapter id (reported in events as lora_id). */
  loraId?: number | null;
  cacheSalt?: string | null;
  /** Requests with prompt_logprobs skip reading the prefix cache. */
  skipPrefixCache?: boolean;
  /**
   * vLLM's `vllm_xargs.kv_cache_report_mode` (default "incremental"). "full" re-announces each prefix hit as a
   * BlockStored when the scheduler looks the request up; any other value changes nothing, as in vLLM.
   */
  kvCacheReportMode?: string;
}

export type AddRequestResult =
  | { ok: true }
  | {
      ok: false;
      /** engine_dead: the live core was closed (a restart or shutdown) before the request reached it. */
      reason: 'duplicate_id' | 'context_too_long' | 'empty_prompt' | 'engine_dead';
      message: string;
    };

export type FinishReason = 'stop' | 'length' | 'abort';

/** Tokens sampled for one request at the end of a step (one per step: no speculative decoding). */
export interface TokenOutput {
  requestId: string;
  tokenIds: number[];
  /** True for the request's first output token (the role chunk goes out with it). */
  first: boolean;
  /** Local prefix-cache hit of the request, in tokens (usage.prompt_tokens_details.cached_tokens). */
  cachedTokens: number;
  promptTokens: number;
  /** Time to first token (first) or since the previous token (later ones), engine ms. */
  latencyMs: number;
  finishReason: FinishReason | null;
}

/** Per-request timings (engine ms) and counts, reported when a request leaves the engine. */
export interface FinishedRequest {
  requestId: string;
  reason: FinishReason;
  /** The EOS token id when reason is "stop". */
  stopTokenId: number | null;
  arrivalMs: number;
  /** First time the scheduler admitted it (null if aborted while still waiting). */
  firstScheduledMs: number | null;
  firstTokenMs: number | null;
  lastTokenMs: number | null;
  finishedMs: number;
  promptTokens: number;
  outputTokens: number;
  cachedTokens: number;
  maxTokens: number;
  numPreemptions: number;
}

/** A request first admitted by the scheduler in this step. */
export interface AdmittedRequest {
  requestId: string;
  /** Prefix-cache hit at admission, in tokens (full blocks, at most prompt length − 1). */
  cachedTokens: number;
  /**
   * Number of this outcome's kvEvents emitted before the admission (orders hits against stores). With
   * kv_cache_report_mode "full" and a hit, the event at this index is the hit's re-announcement.
   */
  eventIndex: number;
  /**
   * Tokens queried (request.num_tokens) for vllm:prefix_cache_queries; 0 when the request skipped the lookup
   * (prompt_logprobs), which vLLM does not count (KVCacheManager.record_prefix_cache_stats).
   */
  queriedTokens: number;
}

export interface ScheduledWork {
  requestId: string;
  /** Tokens computed for this request in the step (1 for a decode). */
  numTokens: number;
  /** Tokens already in its KV cache before the step (context the new tokens attend to). */
  contextTokens: number;
}

export interface StepOutcome {
  kind: 'step';
  startMs: number;
  endMs: number;
  scheduled: ScheduledWork[];
  numScheduledTokens: number;
  /** Tokens scheduled for requests still prefilling (prompt or recomputed tokens), the rest are decodes. */
  numPrefillTokens: number;
  /** Step duration split (ms): the roofline's compute and memory sides, before overheads. */
  computeMs: number;
  memoryMs: number;
  admitted: AdmittedRequest[];
  /** Ids of requests preempted (freed, sent back to the front of the waiting queue) in this step. */
  preempted: string[];
  /** Sampled at endMs. */
  tokens: TokenOutput[];
  finished: FinishedRequest[];
  /**
   * KV events of this step, in order; vLLM publishes them as one batch after the step. An AllBlocksCleared
   * queued by a prefix-cache reset since the previous step comes first.
   */
  kvEvents: KvCacheEvent[];
  /** Scheduler state after the step (what the step's metrics report). */
  numRunning: number;
  numWaiting: number;
  kvUsage: number;
}

/**
 * Out-of-step changes: requests aborted between steps. (A prefix-cache reset has no outcome of its own: its
 * AllBlocksCleared goes out with the next step's kvEvents, as in vLLM.)
 */
export interface ControlOutcome {
  kind: 'abort';
  atMs: number;
  finished: FinishedRequest[];
  kvEvents: KvCacheEvent[];
  numRunning: number;
  numWaiting: number;
  kvUsage: number;
}

export type EngineOutcome = StepOutcome | ControlOutcome;
