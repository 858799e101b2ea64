// EngineRequest: the emulated engine's per-request state (tokens, status, computed and output counts).
import { RequestBlockHasher } from './block-hash.js';
import type { Rng } from './rng.js';
import type { EngineRequestInput } from './types.js';

export type RequestStatus = 'waiting' | 'running' | 'preempted' | 'finished';

/** Engine-side request state (vllm/v1/request.py, the parts the scheduler and cache use). */
export class EngineRequest {
  readonly id: string;
  readonly numPromptTokens: number;
  /** Prompt then output tokens; block hashes cover its full blocks. */
  readonly allTokenIds: number[];
  readonly maxTokens: number;
  readonly ignoreEos: boolean;
  readonly minTokens: number;
  readonly loraName: string | null;
  readonly loraId: number | null;
  readonly cacheSalt: string | null;
  readonly skipPrefixCache: boolean;
  /** vllm/v1/request.py: `extra_args.get("kv_cache_report_mode", "incremental")`, unvalidated. */
  readonly kvCacheReportMode: string;
  readonly hasher: RequestBlockHasher;

  status: RequestStatus = 'waiting';
  numComputedTokens = 0;
  /** Local prefix hit at first admission; −1 until then. */
  numCachedTokens = -1;
  numPreemptions = 0;
  aborted = false;
  firstScheduledMs: number | null = null;
  firstTokenMs: number | null = null;
  lastTokenMs: number | null = null;

  constructor(
    input: EngineRequestInput,
    readonly arrivalMs: number,
    readonly rng: Rng,
    noneHash: Buffer,
    blockSize: number,
  ) {
    this.id = input.id;
    this.allTokenIds = [...input.promptTokenIds];
    this.numPromptTokens = this.allTokenIds.length;
    this.maxTokens = input.maxTokens;
    this.ignoreEos = input.ignoreEos ?? false;
    this.minTokens = input.minTokens ?? 0;
    this.loraName = input.loraName ?? null;
    this.loraId = input.loraId ?? null;
    this.cacheSalt = input.cacheSalt ?? null;
    this.skipPrefixCache = input.skipPrefixCache ?? false;
    this.kvCacheReportMode = input.kvCacheReportMode ?? 'incremental';
    this.hasher = new RequestBlockHasher(noneHash, blockSize, this.loraName, this.cacheSalt);
    this.hasher.update(this.allTokenIds);
  }

  get numTokens(): number {
    return this.allTokenIds.length;
  }

  get numOutputTokens(): number {
    return this.allTokenIds.length - this.numPromptTokens;
  }

  get blockHashes(): readonly string[] {
    return this.hasher.hashes;
  }

  appendOutputToken(token: number): void {
    this.allTokenIds.push(token);
    this.hasher.update(this.allTokenIds);
  }
}
