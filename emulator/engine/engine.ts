// The emulated vLLM V1 engine core: scheduler, KV cache and step timing on a virtual clock.
import { noneHashFromSeed } from './block-hash.js';
import { KvCacheManager } from './kv-cache-manager.js';
import { EngineRequest } from './request.js';
import { Rng } from './rng.js';
import { stepCost, type StepCostModel } from './step-time.js';
import type {
  AddRequestResult,
  AdmittedRequest,
  ControlOutcome,
  EngineBlockHash,
  EngineOutcome,
  EngineRequestInput,
  FinishReason,
  FinishedRequest,
  ScheduledWork,
  StepOutcome,
} from './types.js';

export interface EngineOptions {
  /** Step cost model (a profile from emulator/profiles.ts fits). */
  cost: StepCostModel;
  /** KV cache size in tokens; num_gpu_blocks = floor(kvCapacityTokens / blockSize). */
  kvCapacityTokens: number;
  blockSize: number;
  maxNumBatchedTokens: number;
  maxNumSeqs: number;
  maxModelLen: number;
  /** Mean output length of requests that stop at a sampled EOS. */
  meanOutputTokens: number;
  /** Seeds output sampling (and NONE_HASH when neither noneHash nor hashSeed is given). */
  seed: number;
  /** vLLM's PYTHONHASHSEED: NONE_HASH = sha256_cbor(hashSeed), the same on every engine. */
  hashSeed?: string;
  /** Explicit NONE_HASH (32 bytes), e.g. random per pod start like vLLM without PYTHONHASHSEED. */
  noneHash?: Uint8Array;
  eosTokenId: number;
  /** Token ids output is sampled from (decodable words for the live server); must not hold EOS. */
  outputVocab?: readonly number[];
  /**
   * vLLM's `scheduler_reserve_full_isl` (default true): a waiting request is admitted only when blocks for
   * its whole sequence are free, not just for its first chunk. False gives the older first-chunk check.
   */
  reserveFullIsl?: boolean;
  /**
   * vLLM's `long_prefill_token_threshold` (default 0: none): no request is given more than this many tokens
   * in one step, running or waiting (v1 Scheduler.schedule), so a long prefill leaves budget for others.
   */
  longPrefillTokenThreshold?: number;
}

/**
 * vLLM's renderer message for a prompt longer than max_model_len − the requested output (TokenizeParams
 * _token_len_check, v0.26.1rc1). `atLeast`: the count is a lower bound, because vLLM tokenized the text only
 * up to one token past the limit.
 */
export function contextLengthMessage(
  maxModelLen: number,
  outputTokens: number | bigint,
  promptTokens: number,
  atLeast: boolean,
): string {
  const q = atLeast ? 'at least ' : '';
  const total = BigInt(promptTokens) + BigInt(outputTokens);
  return (
    `This model's maximum context length is ${maxModelLen} tokens. However, you requested ${outputTokens} ` +
    `output tokens and your prompt contains ${q}${promptTokens} input tokens, for a total of ${q}${total} ` +
    'tokens. Please reduce the length of the input prompt or the number of requested output tokens.'
  );
}

/** vLLM's long_prefill_token_threshold rule: a request gets at most `threshold` new tokens a step (0: no cap). */
export function capLongPrefill(threshold: number, numNewTokens: number): number {
  return threshold > 0 && threshold < numNewTokens ? threshold : numNewTokens;
}

export interface EngineSnapshot {
  clockMs: number;
  numGpuBlocks: number;
  /** Usable blocks (num_gpu_blocks − 1: block 0 is vLLM's null block). */
  capacityBlocks: number;
  numFreeBlocks: number;
  numUsedBlocks: number;
  running: string[];
  waiting: string[];
  kvUsage: number;
  /** Multiset of cached block hashes (in use or free-but-cached). */
  cachedHashes: Map<EngineBlockHash, number>;
}

interface InFlightStep {
  startMs: number;
  endMs: number;
  work: { req: EngineRequest; numTokens: number }[];
  outcome: StepOutcome;
}

const DEFAULT_VOCAB: readonly number[] = Array.from({ length: 1000 }, (_, i) => 1000 + i);

/**
 * An emulated vLLM V1 engine core: scheduler (token budget, max_num_seqs, running first, FCFS waiting
 * with head-of-line blocking, chunked prefill, preemption of the newest running request), KV cache
 * (prefix hits at admission, LRU free queue, eviction on reuse) and a step-time model, advanced on a
 * caller-supplied clock. The same class runs live (server/live-driver.ts) and in virtual time (bench).
 *
 * Timing contract: every method takes the current time; times never go backwards. A step starts when
 * work is present and the engine is idle, or right when the previous step ends; tokens and KV event
 * batches come out at the step's end. Requests added at the same instant share a step.
 */
export class Engine {
  readonly blockSize: number;
  readonly numGpuBlocks: number;
  readonly maxNumBatchedTokens: number;
  readonly longPrefillTokenThreshold: number;
  readonly maxNumSeqs: number;
  readonly maxModelLen: number;
  readonly noneHash: Buffer;
  readonly #cost: StepCostModel;
  readonly #kv: KvCacheManager;
  readonly #seed: number;
  readonly #eos: number;
  readonly #vocab: readonly number[];
  readonly #eosProbability: number;
  readonly #reserveFullIsl: boolean;
  readonly #requests = new Map<string, EngineRequest>();
  #waiting: EngineRequest[] = [];
  #running: EngineRequest[] = [];
  #clockMs = 0;
  #inFlight: InFlightStep | null = null;
  #pendingStartMs: number | null = null;
  #outcomes: EngineOutcome[] = [];
  #arrivals = 0;

  constructor(opts: EngineOptions) {
    this.blockSize = opts.blockSize;
    this.numGpuBlocks = Math.floor(opts.kvCapacityTokens / opts.blockSize);
    this.maxNumBatchedTokens = opts.maxNumBatchedTokens;
    this.longPrefillTokenThreshold = opts.longPrefillTokenThreshold ?? 0;
    if (!(Number.isInteger(this.longPrefillTokenThreshold) && this.longPrefillTokenThreshold >= 0))
      throw new RangeError('longPrefillTokenThreshold must be an integer ≥ 0');
    this.maxNumSeqs = opts.maxNumSeqs;
    // vLLM refuses to start unless one max-length request fits the cache; cap instead of refusing.
    this.maxModelLen = Math.min(opts.maxModelLen, (this.numGpuBlocks - 1) * opts.blockSize);
    if (!(this.blockSize >= 1 && this.numGpuBlocks >= 2 && this.maxModelLen >= 2))
      throw new RangeError('KV capacity must hold at least one block of two tokens beyond the null block');
    if (!(this.maxNumBatchedTokens >= 1 && this.maxNumSeqs >= 1))
      throw new RangeError('maxNumBatchedTokens and maxNumSeqs must be ≥ 1');
    this.#cost = opts.cost;
    this.#kv = new KvCacheManager(this.numGpuBlocks, this.blockSize, this.maxModelLen);
    this.#seed = opts.seed;
    this.#eos = opts.eosTokenId;
    this.#vocab = (opts.outputVocab ?? DEFAULT_VOCAB).filter((t) => t !== opts.eosTokenId);
    if (this.#vocab.length === 0) throw new RangeError('outputVocab needs at least one non-EOS token');
    this.#eosProbability = 1 / Math.max(1, opts.meanOutputTokens);
    this.#reserveFullIsl = opts.reserveFullIsl ?? true;
    this.noneHash =
      opts.noneHash !== undefined
        ? Buffer.from(opts.noneHash)
        : noneHashFromSeed(opts.hashSeed ?? `kinference-emulator/${opts.seed}`);
  }

  get clockMs(): number {
    return this.#clockMs;
  }

  /** When the engine next changes state by itself (a step starts or ends), or null when idle. */
  nextEventTimeMs(): number | null {
    return this.#inFlight !== null ? this.#inFlight.endMs : this.#pendingStartMs;
  }

  /** Runs every step start/end at or before tMs and returns all outcomes produced since the last call. */
  advanceTo(tMs: number): EngineOutcome[] {
    this.#advance(tMs, true);
    const out = this.#outcomes;
    this.#outcomes = [];
    return out;
  }

  /** Queues a request that arrived at nowMs. Validation failures are values (the API answers 400). */
  addRequest(input: EngineRequestInput, nowMs: number): AddRequestResult {
    if (this.#requests.has(input.id))
      return { ok: false, reason: 'duplicate_id', message: `request id ${input.id} is already in use` };
    const n = input.promptTokenIds.length;
    // vLLM's InputProcessor and renderer wording (the API server checks both before a request gets here).
    if (n === 0) return { ok: false, reason: 'empty_prompt', message: 'The decoder prompt cannot be empty' };
    if (n + Math.max(1, input.maxTokens) > this.maxModelLen)
      return {
        ok: false,
        reason: 'context_too_long',
        message: contextLengthMessage(
          this.maxModelLen,
          input.maxTokens,
          n,
          n === this.maxModelLen - input.maxTokens + 1,
        ),
      };
    this.#advance(nowMs, false);
    const req = new EngineRequest(
      { ...input, maxTokens: Math.max(1, input.maxTokens) },
      nowMs,
      new Rng(this.#seed, this.#arrivals++),
      this.noneHash,
      this.blockSize,
    );
    this.#requests.set(req.id, req);
    this.#waiting.push(req);
    if (this.#inFlight === null && this.#pendingStartMs === null) this.#pendingStartMs = nowMs;
    return { ok: true };
  }

  /** Client went away: frees the request (at the end of the step it is part of, if any). */
  abortRequest(id: string, nowMs: number): boolean {
    this.#advance(nowMs, false);
    const req = this.#requests.get(id);
    if (req === undefined || req.aborted) return false;
    req.aborted = true;
    const inStep = this.#inFlight?.work.some((w) => w.req === req) ?? false;
    if (inStep) return true;
    const finished = this.#finish(req, 'abort', null, nowMs);
    this.#outcomes.push(this.#control(nowMs, [finished]));
    return true;
  }

  /**
   * vLLM reset_prefix_cache: succeeds only when no request holds blocks. AllBlocksCleared is only queued, as
   * BlockPool.reset_prefix_cache appends it to kv_event_queue: it goes out first in the next step's batch
   * (the scheduler publishes only from a step), and an idle engine publishes nothing.
   */
  resetPrefixCache(nowMs: number): boolean {
    this.#advance(nowMs, false);
    if (this.#inFlight !== null || this.#running.length > 0) return false;
    return this.#kv.pool.resetPrefixCache();
  }

  get numRunning(): number {
    return this.#running.length;
  }

  get numWaiting(): number {
    return this.#waiting.length;
  }

  get kvUsage(): number {
    return this.#kv.pool.usage;
  }

  snapshot(): EngineSnapshot {
    const pool = this.#kv.pool;
    return {
      clockMs: this.#clockMs,
      numGpuBlocks: this.numGpuBlocks,
      capacityBlocks: pool.capacity,
      numFreeBlocks: pool.numFreeBlocks,
      numUsedBlocks: pool.blocks.filter((b) => b.refCnt > 0 && b !== pool.nullBlock).length,
      running: this.#running.map((r) => r.id),
      waiting: this.#waiting.map((r) => r.id),
      kvUsage: pool.usage,
      cachedHashes: pool.cachedHashCounts(),
    };
  }

  /** Internal consistency violations (empty when sound): block references and queue membership. */
  checkInvariants(): string[] {
    const problems: string[] = [];
    const pool = this.#kv.pool;
    const refs = this.#kv.referenceCounts();
    for (const b of pool.blocks) {
      if (b === pool.nullBlock) continue;
      const expected = refs.get(b.id) ?? 0;
      if (b.refCnt !== expected) problems.push(`block ${b.id}: refCnt ${b.refCnt}, referenced ${expected}×`);
      if (b.inFreeQueue !== (b.refCnt === 0))
        problems.push(`block ${b.id}: refCnt ${b.refCnt}, free ${b.inFreeQueue}`);
    }
    for (const r of this.#running) {
      const have = this.#kv.blocksOf(r.id).length;
      const need = Math.ceil(r.numComputedTokens / this.blockSize);
      if (have < need)
        problems.push(`request ${r.id}: ${have} blocks for ${r.numComputedTokens} computed tokens`);
    }
    for (const r of this.#waiting)
      if (this.#kv.blocksOf(r.id).length > 0) problems.push(`waiting request ${r.id} holds blocks`);
    if (this.#running.length > this.maxNumSeqs)
      problems.push(`${this.#running.length} running > max_num_seqs`);
    return problems;
  }

  // ---------------------------------------------------------------------------------------------------

  /** Processes events before t (or at t when inclusive), then moves the clock to t. */
  #advance(t: number, inclusive: boolean): void {
    if (t < this.#clockMs) throw new RangeError(`time went backwards: ${t} < ${this.#clockMs}`);
    for (;;) {
      const next = this.nextEventTimeMs();
      if (next === null || (inclusive ? next > t : next >= t)) break;
      if (this.#inFlight !== null) this.#finishStep();
      else this.#startStep(next);
    }
    this.#clockMs = t;
  }

  #startStep(at: number): void {
    this.#clockMs = at;
    this.#pendingStartMs = null;
    const pool = this.#kv.pool;
    let budget = this.maxNumBatchedTokens;
    const work: { req: EngineRequest; numTokens: number }[] = [];
    const scheduled: ScheduledWork[] = [];
    const preempted: string[] = [];
    const admitted: AdmittedRequest[] = [];
    let prefillTokens = 0;

    // 1. Running requests, in order: decodes take one token, unfinished prefills their next chunk.
    let i = 0;
    while (i < this.#running.length && budget > 0) {
      const req = this.#running[i] as EngineRequest;
      const n = Math.min(
        capLongPrefill(this.longPrefillTokenThreshold, req.numTokens - req.numComputedTokens),
        budget,
        this.maxModelLen - 1 - req.numComputedTokens,
      );
      if (n <= 0) {
        i++;
        continue;
      }
      let ok = false;
      for (;;) {
        if (this.#kv.allocateSlots(req, n) !== null) {
          ok = true;
          break;
        }
        // Out of blocks: preempt the newest running request (recompute later), possibly this one.
        const victim = this.#running.pop() as EngineRequest;
        this.#kv.free(victim);
        victim.status = 'preempted';
        victim.numComputedTokens = 0;
        victim.numPreemptions++;
        this.#waiting.unshift(victim);
        preempted.push(victim.id);
        if (victim === req) break;
      }
      if (!ok) break;
      work.push({ req, numTokens: n });
      scheduled.push({ requestId: req.id, numTokens: n, contextTokens: req.numComputedTokens });
      if (req.numComputedTokens < req.numTokens - 1) prefillTokens += n;
      budget -= n;
      i++;
    }

    // 2. Waiting requests, FCFS, only if nothing was preempted; the head blocks the line when it cannot fit.
    if (preempted.length === 0) {
      while (this.#waiting.length > 0 && budget > 0 && this.#running.length < this.maxNumSeqs) {
        const req = this.#waiting[0] as EngineRequest;
        const eventIndex = pool.pendingEventCount;
        const hit = this.#kv.getComputedBlocks(req);
        const n = Math.min(
          capLongPrefill(this.longPrefillTokenThreshold, req.numTokens - hit.numTokens),
          budget,
        );
        if (this.#kv.allocateSlots(req, n, hit, this.#reserveFullIsl) === null) break;
        this.#waiting.shift();
        this.#running.push(req);
        req.status = 'running';
        req.numComputedTokens = hit.numTokens;
        if (req.numCachedTokens < 0) {
          req.numCachedTokens = hit.numTokens;
          req.firstScheduledMs = at;
          admitted.push({
            requestId: req.id,
            cachedTokens: hit.numTokens,
            eventIndex,
            // vLLM records no prefix-cache stats for a request that skipped the lookup.
            queriedTokens: req.skipPrefixCache ? 0 : req.numTokens,
          });
        }
        work.push({ req, numTokens: n });
        scheduled.push({ requestId: req.id, numTokens: n, contextTokens: hit.numTokens });
        prefillTokens += n;
        budget -= n;
      }
    }

    if (work.length === 0) {
      if (this.#waiting.length > 0 || this.#running.length > 0)
        throw new Error(
          'emulator engine: work is queued but nothing could be scheduled (KV capacity too small?)',
        );
      return;
    }
    for (const w of work) w.req.numComputedTokens += w.numTokens;

    const cost = stepCost(this.#cost, scheduled);
    const endMs = at + cost.totalMs;
    const outcome: StepOutcome = {
      kind: 'step',
      startMs: at,
      endMs,
      scheduled,
      numScheduledTokens: this.maxNumBatchedTokens - budget,
      numPrefillTokens: prefillTokens,
      computeMs: cost.computeMs,
      memoryMs: cost.memoryMs,
      admitted,
      preempted,
      tokens: [],
      finished: [],
      kvEvents: pool.takeEvents(),
      numRunning: 0,
      numWaiting: 0,
      kvUsage: 0,
    };
    this.#inFlight = { startMs: at, endMs, work, outcome };
  }

  #finishStep(): void {
    const step = this.#inFlight as InFlightStep;
    this.#inFlight = null;
    const t = step.endMs;
    this.#clockMs = t;
    const out = step.outcome;
    for (const { req } of step.work) {
      if (req.aborted) {
        if (req.status !== 'finished') out.finished.push(this.#finish(req, 'abort', null, t));
        continue;
      }
      // A partial prefill chunk samples nothing; a completed prefill or a decode samples one token.
      if (req.status !== 'running' || req.numComputedTokens < req.numTokens) continue;
      const token = this.#sample(req);
      req.appendOutputToken(token);
      const first = req.numOutputTokens === 1;
      const latencyMs = t - (first ? req.arrivalMs : (req.lastTokenMs as number));
      if (first) req.firstTokenMs = t;
      req.lastTokenMs = t;
      let reason: FinishReason | null = null;
      if (!req.ignoreEos && token === this.#eos && req.numOutputTokens >= req.minTokens) reason = 'stop';
      else if (req.numOutputTokens >= req.maxTokens || req.numTokens >= this.maxModelLen) reason = 'length';
      out.tokens.push({
        requestId: req.id,
        tokenIds: [token],
        first,
        cachedTokens: Math.max(0, req.numCachedTokens),
        promptTokens: req.numPromptTokens,
        latencyMs,
        finishReason: reason,
      });
      if (reason !== null) out.finished.push(this.#finish(req, reason, reason === 'stop' ? token : null, t));
    }
    out.numRunning = this.#running.length;
    out.numWaiting = this.#waiting.length;
    out.kvUsage = this.#kv.pool.usage;
    this.#outcomes.push(out);
    if (this.#running.length > 0 || this.#waiting.length > 0) this.#pendingStartMs = t;
  }

  #sample(req: EngineRequest): number {
    const canStop = !req.ignoreEos && req.numOutputTokens + 1 > req.minTokens;
    if (canStop && req.rng.float() < this.#eosProbability) return this.#eos;
    return this.#vocab[req.rng.int(this.#vocab.length)] as number;
  }

  #finish(req: EngineRequest, reason: FinishReason, stopTokenId: number | null, t: number): FinishedRequest {
    req.status = 'finished';
    this.#kv.free(req);
    this.#requests.delete(req.id);
    this.#running = this.#running.filter((r) => r !== req);
    this.#waiting = this.#waiting.filter((r) => r !== req);
    if (this.#running.length === 0 && this.#waiting.length === 0 && this.#inFlight === null)
      this.#pendingStartMs = null;
    return {
      requestId: req.id,
      reason,
      stopTokenId,
      arrivalMs: req.arrivalMs,
      firstScheduledMs: req.firstScheduledMs,
      firstTokenMs: req.firstTokenMs,
      lastTokenMs: req.lastTokenMs,
      finishedMs: t,
      promptTokens: req.numPromptTokens,
      outputTokens: req.numOutputTokens,
      cachedTokens: Math.max(0, req.numCachedTokens),
      maxTokens: req.maxTokens,
      numPreemptions: req.numPreemptions,
    };
  }

  #control(atMs: number, finished: FinishedRequest[]): ControlOutcome {
    const out: ControlOutcome = {
      kind: 'abort',
      atMs,
      finished,
      kvEvents: [],
      numRunning: this.#running.length,
      numWaiting: this.#waiting.length,
      kvUsage: this.#kv.pool.usage,
    };
    return out;
  }
}
