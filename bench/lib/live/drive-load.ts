// Drives one GuideLLM profile (Poisson or N streams) against real endpoints, as the DES client does.
import { setMaxListeners } from 'node:events';
import {
  GUIDELLM_WORKERS,
  profileDurationS,
  workerOfStream,
  type Profile,
  type RequestRecord,
} from '../types.js';
import { arrivalSlots } from '../workload/arrivals.js';
import { ConversationClient } from '../workload/client.js';
import { chatBody } from '../workload/prepare.js';
import type { WorkloadFactory } from '../workload/workloads.js';
import type { StreamTiming } from './http-client.js';

export interface LoadRunResult {
  records: RequestRecord[];
  windowStartMs: number;
  windowEndMs: number;
  durationMs: number;
  wallMs: number;
}

/** What a send hook gets: the client worker, the record it may fill (`pod`), the body, the run's clock. */
export interface SendContext {
  worker: number;
  rec: RequestRecord;
  body: string;
  /** Real performance.now() ms → the run's virtual ms (× timeScale since the start). */
  virt(realMs: number): number;
  /** Aborted when the run ends, with `cancelAtEnd`: the request is then incomplete. */
  signal: AbortSignal;
}

export interface DriveOptions {
  profile: Profile;
  factory: WorkloadFactory;
  /** The `model` field of every request body. */
  model: string;
  seed: number;
  trial: number;
  /** Real time runs this many times faster than the profile's (1 against a real fleet). */
  timeScale: number;
  /** Sends one request and times its stream. */
  send(ctx: SendContext): Promise<StreamTiming>;
  /** A request that ended inside the run, its record final. */
  onComplete?(ctx: SendContext, t: StreamTiming): void;
  /** Every request, once its stream ended (incomplete ones too). */
  onSettled?(rec: RequestRecord, t: StreamTiming): void;
  /** Once aborted, nothing more is sent; the run waits for what is in flight and returns. */
  signal?: AbortSignal;
  /**
   * Cancel the requests still running when the run ends, as GuideLLM does (they are incomplete either way),
   * instead of waiting for them. A real server then stops generating them.
   */
  cancelAtEnd?: boolean;
  /** The open-loop schedule's stream name (default the workload's): the DES names a tenant's `tenant:workload`. */
  arrivalStream?: string;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function abortableSleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * Runs one GuideLLM profile against real endpoints. Open loop: the arrival schedule of the discrete-event
 * run (slept for t / timeScale), each slot sent by its client worker. Concurrent: N streams, each sending its
 * next request when the previous ended, or the Retry-After after a 429. Every client timestamp is
 * multiplied back by timeScale, so results read in the profile's units. Requests still running at the end
 * are incomplete (GuideLLM); the run waits for them so the next one starts on idle pods, or with
 * `cancelAtEnd` cancels them.
 */
export async function driveLoad(o: DriveOptions): Promise<LoadRunResult> {
  const k = o.timeScale;
  const durationMs = profileDurationS(o.profile) * 1000;
  const client = new ConversationClient(o.factory);
  const records: RequestRecord[] = [];
  const inflight = new Set<Promise<void>>();
  const endOfRun = new AbortController();
  // Every request in flight listens to it: as many listeners as streams, not a leak.
  setMaxListeners(0, endOfRun.signal);
  const t0 = performance.now();
  const virt = (realMs: number): number => (realMs - t0) * k;
  // When sending stopped early: the measure window ends there, so the rates count only what ran.
  let stoppedAtMs = o.signal?.aborted ? 0 : Number.POSITIVE_INFINITY;
  const onStop = (): void => {
    stoppedAtMs = virt(performance.now());
  };
  o.signal?.addEventListener('abort', onStop, { once: true });

  /** One request from client worker `worker`; resolves with the Retry-After in real ms after a 429. */
  const sendOne = async (worker: number): Promise<number | null> => {
    const turn = await client.next(worker);
    const rec: RequestRecord = {
      key: turn.key,
      conversationId: turn.conv.id,
      turnIndex: turn.turn,
      cluster: turn.conv.cluster,
      pod: '',
      status: 'incomplete',
      startMs: virt(performance.now()),
      firstTokenMs: null,
      lastTokenMs: null,
      endMs: null,
      promptTokens: 0,
      outputTokens: 0,
      cachedTokens: 0,
    };
    records.push(rec);
    const ctx: SendContext = {
      worker,
      rec,
      body: chatBody(turn, o.model),
      virt,
      signal: endOfRun.signal,
    };
    const t = await o.send(ctx);
    rec.startMs = virt(t.startMs);
    rec.promptTokens = t.promptTokens;
    rec.outputTokens = t.outputTokens;
    rec.cachedTokens = t.cachedTokens;
    if (t.ok) {
      rec.firstTokenMs = virt(t.firstTokenMs!);
      rec.lastTokenMs = virt(t.lastTokenMs!);
    }
    if (virt(t.endMs) > durationMs) {
      client.complete(turn, null);
      o.onSettled?.(rec, t);
      return null;
    }
    rec.endMs = virt(t.endMs);
    rec.status = t.ok ? 'successful' : 'errored';
    if (t.status === 429) rec.pod = ''; // answered by the gateway, as in the DES
    client.complete(turn, t.ok ? t.text : null);
    o.onComplete?.(ctx, t);
    o.onSettled?.(rec, t);
    return t.status === 429 && t.retryAfterS !== null ? (t.retryAfterS * 1000) / k : null;
  };
  const track = (p: Promise<void>): void => {
    const q = p.finally(() => inflight.delete(q));
    inflight.add(q);
  };

  if (o.profile.kind === 'poisson') {
    const slots = arrivalSlots({
      ratePerS: o.profile.rate,
      durationMs,
      process: o.profile.arrivals ?? 'poisson',
      clientWorkers: o.profile.clientWorkers ?? GUIDELLM_WORKERS,
      seed: o.seed,
      trial: o.trial,
      workload: o.arrivalStream ?? o.factory.name,
    });
    for (const slot of slots) {
      const wait = slot.atMs / k - (performance.now() - t0);
      if (wait > 0) await sleep(wait);
      if (o.signal?.aborted) break;
      track(sendOne(slot.worker).then(() => undefined));
    }
  } else {
    const profile = o.profile;
    for (let i = 0; i < profile.streams; i++)
      track(
        (async (): Promise<void> => {
          while (virt(performance.now()) < durationMs && !o.signal?.aborted && !endOfRun.signal.aborted) {
            const retryMs = await sendOne(workerOfStream(profile, i));
            if (retryMs !== null) await sleep(retryMs);
          }
        })(),
      );
  }
  // Timers count from the event loop's cached clock, which can lag performance.now() by what ran since: a
  // timer may fire early. Wait until the run's clock says it is over, or a cancelled request reads as failed.
  for (
    let endWait = durationMs / k - (performance.now() - t0);
    endWait > 0 && !o.signal?.aborted;
    endWait = durationMs / k - (performance.now() - t0)
  )
    await abortableSleep(Math.max(1, endWait), o.signal);
  if (o.cancelAtEnd && !o.signal?.aborted) endOfRun.abort();
  await Promise.all([...inflight]);
  o.signal?.removeEventListener('abort', onStop);
  const windowStartMs = o.profile.warmupS * 1000;
  return {
    records,
    windowStartMs,
    // Stopped before the window opened: an empty window, nothing measured.
    windowEndMs: Math.max(windowStartMs, Math.min(durationMs - o.profile.cooldownS * 1000, stoppedAtMs)),
    durationMs,
    wallMs: performance.now() - t0,
  };
}
