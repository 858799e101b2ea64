// The TTFT model: each pod's predicted time to first token from its cached prefix, queue and calibration.
import type { Calibration, PodLookup, Reservation } from './types.js';

/**
 * The TTFT model (docs/architecture.md "The TTFT model"), per pod:
 *   TTFT = queue + prefill(uncached, context) + load(cpu tier) + interference + overhead
 *   prefill      = U·p + a·U·(C + P)/2          U uncached tokens, C cached, P prompt; a·Σcontext is attention
 *   load         = L·l                          L tokens found only in the CPU tier
 *   queue        = Q·p + W·overhead             Q queued prefill tokens (waiting work + our reservations)
 *                                               and at least our own reservations' FCFS prefill backlog
 *   interference = steps·d if decodes run       steps = ⌈(Q+U)/(B−R)⌉ engine steps shared with R decodes
 * vLLM recomputes the last prompt token, so at most ⌊(P−1)/bs⌋·bs tokens can be cached.
 */

/** Conservative defaults (an L40S-class GPU, a ~30B model) until the collector calibrates a pod. */
export const DEFAULT_CALIBRATION: Calibration = {
  overheadMs: 25,
  prefillMsPerToken: 0.33,
  attentionMsPerToken2: 0.000006,
  cpuLoadMsPerToken: 0.02,
  decodeStepMs: 45,
  maxBatchedTokens: 2048,
};

export interface PredictOptions {
  promptTokens: number;
  blockSize: number;
  nowMs: number;
  staleAfterMs: number;
  /** Reservations on this pod still within their TTL. */
  reservations: readonly Reservation[];
  defaultCalibration?: Calibration;
  /** Online correction from observed TTFTs (actual / predicted, smoothed); 1 when none. */
  ttftFactor?: number;
  /**
   * Drain this router's backlog over each reservation's predicted prefill, attention term included
   * (`prefillBacklogMs`), instead of its uncached tokens at the linear rate. Admission control turns it on.
   */
  backlogAttention?: boolean;
}

export interface Prediction {
  podId: string;
  address: string;
  healthy: boolean;
  /** Prefix tokens held on GPU (credited); those only on the CPU tier are `cpuTokens`. */
  cachedTokens: number;
  /** Prefix tokens the pod would load back from its CPU tier, beyond `cachedTokens`. */
  cpuTokens: number;
  uncachedTokens: number;
  queuedTokens: number;
  running: number;
  waiting: number;
  queueMs: number;
  prefillMs: number;
  loadMs: number;
  interferenceMs: number;
  overheadMs: number;
  /** The model's TTFT before the online correction factor. */
  modelTtftMs: number;
  ttftFactor: number;
  predictedTtftMs: number;
  /** Age of the pod's freshest index data (KV event or scrape), ms; null when never seen. */
  indexAgeMs: number | null;
  /** Fraction of cached credit kept (1 fresh, lower when stale or resyncing). */
  cacheCredit: number;
  /** PodState.partialSinceMs: since when the index may lack blocks the pod holds (0: it has them all). */
  partialSinceMs: number;
  /** ITL the pod's decoding requests are predicted to see if it takes this request; null when not guarded. */
  predictedItlMs: number | null;
  /** False when taking this request would push the pod past the ITL bound (itl-guard.ts). */
  withinItl: boolean;
  reasons: string[];
  /**
   * The pod's measured GPU time per token (prefill ms per uncached token, one decode step's ms), for prices
   * derived from a GPU-hour price (src/usage); absent until the collector has calibrated the pod.
   */
  speeds?: { prefillMsPerToken: number; decodeStepMs: number };
}

/** Cached-credit factor: full while fresh, linear down to 0 at 3× the staleness bound; halved while resyncing. */
export function cacheCreditFactor(
  indexAgeMs: number | null,
  staleAfterMs: number,
  resyncing: boolean,
): number {
  let f = 1;
  if (indexAgeMs === null) f = 0;
  else if (indexAgeMs > staleAfterMs) f = Math.max(0, 1 - (indexAgeMs - staleAfterMs) / (2 * staleAfterMs));
  return resyncing ? f * 0.5 : f;
}

/**
 * Reservations in arrival order. A router's own list is kept in that order already, so it is returned as
 * is (checked in one pass): every decision prices every pod's list, and a busy node holds thousands.
 */
function byArrival(reservations: readonly Reservation[]): readonly Reservation[] {
  for (let i = 1; i < reservations.length; i++)
    if (reservations[i]!.atMs < reservations[i - 1]!.atMs)
      return [...reservations].sort((a, b) => a.atMs - b.atMs);
  return reservations;
}

/**
 * Uncached prompt tokens of this router's reservations on a pod that are not yet prefilled, if the pod
 * works through them in arrival order at `msPerToken` (a work-conserving FCFS backlog).
 */
export function prefillBacklogTokens(
  reservations: readonly Reservation[],
  nowMs: number,
  msPerToken: number,
): number {
  if (reservations.length === 0 || !(msPerToken > 0)) return 0;
  const sorted = byArrival(reservations);
  let backlog = 0;
  let t = sorted[0]!.atMs;
  for (const r of sorted) {
    backlog = Math.max(0, backlog - (r.atMs - t) / msPerToken) + r.uncachedTokens;
    t = r.atMs;
  }
  return Math.max(0, backlog - (nowMs - t) / msPerToken);
}

/**
 * Milliseconds of prefill left in this router's reservations on a pod, if the pod works through them in
 * arrival order, each taking its predicted prefill time (linear and attention terms, as `predictTtft` prices
 * a prompt). The linear drain alone finishes a cold 16k-token prefill ~0.8 s early (5.4 s of 6.2 s), and in
 * that gap a busy pod looks as free as one that is only decoding.
 */
export function prefillBacklogMs(
  reservations: readonly Reservation[],
  nowMs: number,
  cal: Calibration,
): number {
  if (reservations.length === 0) return 0;
  const sorted = byArrival(reservations);
  let backlog = 0;
  let t = sorted[0]!.atMs;
  for (const r of sorted) {
    const u = Math.max(0, r.uncachedTokens);
    const reused = Math.max(0, r.promptTokens - u);
    backlog = Math.max(0, backlog - (r.atMs - t)) + u * cal.prefillMsPerToken;
    backlog += (cal.attentionMsPerToken2 * u * (reused + r.promptTokens)) / 2;
    t = r.atMs;
  }
  return Math.max(0, backlog - (nowMs - t));
}

export function predictTtft(pod: PodLookup, opts: PredictOptions): Prediction {
  const s = pod.state;
  const cal = s.calibration ?? opts.defaultCalibration ?? DEFAULT_CALIBRATION;
  const P = Math.max(0, Math.floor(opts.promptTokens));
  const bs = opts.blockSize;
  const reasons: string[] = [];
  const maxCached = P > 0 ? Math.floor((P - 1) / bs) * bs : 0;

  const freshest = Math.max(s.lastEventAtMs, s.lastScrapeAtMs);
  const indexAgeMs = freshest > 0 ? Math.max(0, opts.nowMs - freshest) : null;
  const credit = cacheCreditFactor(indexAgeMs, opts.staleAfterMs, s.resyncing);
  if (credit < 1)
    reasons.push(
      s.resyncing ? 'index resyncing: cached credit halved' : 'stale index: cached credit discounted',
    );

  const creditBlocks = (blocks: number): number =>
    Math.floor((Math.min(blocks * bs, maxCached) * credit) / bs) * bs;
  // Prefix tokens the pod need not prefill: held on GPU, or loaded back from the CPU tier (the longer).
  const gpuTokens = creditBlocks(pod.prefixBlocks.GPU);
  const reusedTokens = Math.max(gpuTokens, creditBlocks(pod.prefixBlocks.CPU));
  const cpuTokens = reusedTokens - gpuTokens;
  const U = P - reusedTokens;

  // Our assignments the last scrape cannot have seen yet.
  let reservedTokens = 0;
  let unscraped = 0;
  for (const r of opts.reservations)
    if (r.atMs >= s.lastScrapeAtMs) {
      reservedTokens += r.uncachedTokens;
      unscraped++;
    }
  // Metrics show a prefilling request as "running", not as queued work; our own recent assignments,
  // drained first-come first-served at the prefill rate, say how much of that work is still to do.
  const ownBacklog =
    opts.backlogAttention && cal.prefillMsPerToken > 0
      ? prefillBacklogMs(opts.reservations, opts.nowMs, cal) / cal.prefillMsPerToken
      : prefillBacklogTokens(opts.reservations, opts.nowMs, cal.prefillMsPerToken);
  const queuedTokens = Math.max(s.waiting * s.meanQueuedPrefillTokens + reservedTokens, ownBacklog);
  const waitingReqs = s.waiting + unscraped;

  const prefillMs = U * cal.prefillMsPerToken + (cal.attentionMsPerToken2 * U * (reusedTokens + P)) / 2;
  const loadMs = cpuTokens * cal.cpuLoadMsPerToken;
  const queueMs = queuedTokens * cal.prefillMsPerToken + waitingReqs * cal.overheadMs;
  const budget = Math.max(1, cal.maxBatchedTokens - s.running);
  const interferenceMs = s.running > 0 ? Math.ceil((queuedTokens + U) / budget) * cal.decodeStepMs : 0;
  const modelTtftMs = queueMs + prefillMs + loadMs + interferenceMs + cal.overheadMs;
  const ttftFactor = opts.ttftFactor ?? 1;
  const predictedTtftMs = modelTtftMs * ttftFactor;
  if (ttftFactor !== 1) reasons.push(`observed latency correction ×${ttftFactor.toFixed(2)}`);

  if (!s.calibration) reasons.push('default calibration');
  if (!s.healthy) reasons.push('unhealthy');
  return {
    podId: s.podId,
    address: s.address,
    healthy: s.healthy,
    cachedTokens: gpuTokens,
    cpuTokens,
    uncachedTokens: U,
    queuedTokens,
    running: s.running,
    waiting: s.waiting,
    queueMs,
    prefillMs,
    loadMs,
    interferenceMs,
    overheadMs: cal.overheadMs,
    modelTtftMs,
    ttftFactor,
    predictedTtftMs,
    indexAgeMs,
    cacheCredit: credit,
    partialSinceMs: s.partialSinceMs,
    predictedItlMs: null,
    withinItl: true,
    reasons,
    ...(s.calibration
      ? {
          speeds: {
            prefillMsPerToken: s.calibration.prefillMsPerToken,
            decodeStepMs: s.decodeSteps?.stepMs ?? s.calibration.decodeStepMs,
          },
        }
      : {}),
  };
}
