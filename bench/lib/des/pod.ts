// SimPod: one emulated vLLM pod in virtual time, the emulator's engine plus the runner's bookkeeping.
import { ENGINE_HASH_ALGO } from '../../../emulator/engine/block-hash.js';
import { Engine } from '../../../emulator/engine/engine.js';
import type { EngineProfile } from '../../../emulator/profiles.js';
import type { StepOutcome } from '../../../emulator/engine/types.js';
import { VllmMetrics } from '../../../emulator/server/vllm-metrics.js';

/** Engine settings of one emulated pod (a profile from emulator/profiles.ts plus overrides). */
export interface PodSpec {
  profile: EngineProfile;
  kvCapacityTokens: number;
  blockSize: number;
  eosTokenId: number;
  outputVocab: readonly number[];
  /** vLLM's scheduler_reserve_full_isl; off = admission by first chunk, as vLLM before it (2026-03). */
  reserveFullIsl?: boolean;
  /** vLLM's long_prefill_token_threshold (absent: 0, none). */
  longPrefillTokenThreshold?: number;
}

/** Per-request progress seen from step outcomes: what the oracle's forward model starts from. */
export interface LedgerEntry {
  promptTokens: number;
  maxTokens: number;
  /** Tokens in the KV cache (prompt + output), from the steps' scheduled work. */
  computed: number;
  outputs: number;
  admitted: boolean;
  /** Engine block hashes of the prompt (only when the oracle needs them). */
  blockHashes: readonly string[] | null;
}

/** One emulated vLLM pod in virtual time: the emulator's engine plus the bookkeeping the runner needs. */
export class SimPod {
  readonly engine: Engine;
  /** Live requests in the engine, by id. */
  readonly ledger = new Map<string, LedgerEntry>();
  /** Σ(prompt − cached) and count of requests admitted since the last scrape (the collector's estimate). */
  admittedUncached = 0;
  admittedCount = 0;
  lastMeanQueuedPrefill = 0;
  /**
   * The pod's vLLM /metrics (the emulator's own exporter), recorded step by step when the run feeds the
   * collector's calibration from them (`enableMetrics`); null otherwise.
   */
  metrics: VllmMetrics | null = null;
  /** Totals for the report. */
  stepCount = 0;
  busyMs = 0;
  preemptions = 0;

  constructor(
    readonly id: string,
    readonly address: string,
    readonly spec: PodSpec,
    seed: number,
  ) {
    const p = spec.profile;
    this.engine = new Engine({
      cost: p,
      kvCapacityTokens: spec.kvCapacityTokens,
      blockSize: spec.blockSize,
      maxNumBatchedTokens: p.maxNumBatchedTokens,
      maxNumSeqs: p.maxNumSeqs,
      maxModelLen: p.maxModelLen,
      meanOutputTokens: p.meanOutputTokens,
      seed,
      hashSeed: `bench/${id}/${seed}`,
      eosTokenId: spec.eosTokenId,
      outputVocab: spec.outputVocab,
      ...(spec.reserveFullIsl !== undefined ? { reserveFullIsl: spec.reserveFullIsl } : {}),
      ...(spec.longPrefillTokenThreshold
        ? { longPrefillTokenThreshold: spec.longPrefillTokenThreshold }
        : {}),
    });
  }

  /** Records every step into a vLLM /metrics exporter, as the live emulator does (time scale 1). */
  enableMetrics(modelName: string): void {
    this.metrics = new VllmMetrics({
      modelName,
      engineIndexes: [0],
      maxModelLen: this.engine.maxModelLen,
      blockSize: this.engine.blockSize,
      numGpuBlocks: this.engine.numGpuBlocks,
      msToSeconds: (ms) => ms / 1000,
      hashAlgo: ENGINE_HASH_ALGO,
    });
  }

  /** Applies a step to the ledger (before the runner reads its tokens). */
  noteStep(s: StepOutcome): void {
    this.metrics?.record(0, s);
    this.stepCount++;
    this.busyMs += s.endMs - s.startMs;
    this.preemptions += s.preempted.length;
    for (const id of s.preempted) {
      const e = this.ledger.get(id);
      if (e) e.computed = 0;
    }
    for (const a of s.admitted) {
      const e = this.ledger.get(a.requestId);
      if (e) e.admitted = true;
      this.admittedUncached += a.queriedTokens - a.cachedTokens;
      this.admittedCount++;
    }
    for (const w of s.scheduled) {
      const e = this.ledger.get(w.requestId);
      if (e) e.computed = w.contextTokens + w.numTokens;
    }
    for (const t of s.tokens) {
      const e = this.ledger.get(t.requestId);
      if (e) e.outputs += t.tokenIds.length;
    }
    for (const f of s.finished) this.ledger.delete(f.requestId);
  }

  /** The collector's view of mean uncached prompt tokens per request (from counter deltas), then reset. */
  takeMeanQueuedPrefill(): number {
    if (this.admittedCount > 0) this.lastMeanQueuedPrefill = this.admittedUncached / this.admittedCount;
    this.admittedUncached = 0;
    this.admittedCount = 0;
    return this.lastMeanQueuedPrefill;
  }
}
