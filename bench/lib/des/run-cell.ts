// Runs one benchmark cell in virtual time: one arm, workload, load profile and trial, GuideLLM's client.
import { RequestBlockHasher } from '../../../emulator/engine/block-hash.js';
import type { StepOutcome } from '../../../emulator/engine/types.js';
import type { Arm, ArmDecision, ArmRequest, PodView } from '../arms/types.js';
import type { Profile, RequestRecord } from '../types.js';
import { GUIDELLM_WORKERS, profileDurationS, workerOfStream } from '../types.js';
import { ConversationClient, type Turn } from '../workload/client.js';
import { arrivalSlots } from '../workload/arrivals.js';
import { prepareRequest, type PreparedRequest } from '../workload/prepare.js';
import type { WorkloadFactory } from '../workload/workloads.js';
import type { ChatTemplate, PromptTokenizer } from '../../../src/tokenize/types.js';
import { Rng } from '../rng.js';
import type { CollectorFeed } from './feed.js';
import { SimPod } from './pod.js';

/** Fixed latencies of the path around the engine (virtual ms). */
export interface PathLatency {
  /** Client → gateway → vLLM API server → engine core: HTTP, routing, templating and tokenizing. */
  requestOverheadMs: number;
  /** Extra per prompt token on that path (API-server tokenization of long prompts). */
  requestOverheadMsPerToken: number;
  /**
   * Extra per prompt token the gateway's plugin tokenized itself (not served by its segment cache); the
   * kinference arms report them. Absent: none (the seed schedule folds the plugin into the per-token term).
   */
  requestOverheadMsPerTokenizedToken?: number;
  /**
   * Perturbs each request's path by a uniform [0, maxMs) from stream `stream` (bench:live's replicates: how
   * far a cell's outcome moves when the path's timing does, the noise a live run carries).
   */
  jitter?: { maxMs: number; stream: number };
  /** Engine → client for each streamed token. */
  responseOverheadMs: number;
  /** vLLM publishes a step's KV events after the step; ZMQ → collector → index. */
  kvEventDelayMs: number;
  /** Collector scrape interval of /metrics. */
  scrapeIntervalMs: number;
}

export interface CellInput {
  arm: Arm;
  factory: WorkloadFactory;
  profile: Profile;
  pods: SimPod[];
  model: string;
  template: ChatTemplate;
  promptTokenizer: PromptTokenizer;
  /** id → word, to turn sampled output ids back into reply text (multiturn history). */
  wordOf: ReadonlyMap<number, string>;
  latency: PathLatency;
  seed: number;
  trial: number;
  feed: CollectorFeed | null;
  /** The oracle needs each prompt's engine block hashes on its pod. */
  trackBlockHashes: boolean;
  /**
   * The collector restarts at this virtual time (ms): every pod is cleared and rebuilt from its replay buffer
   * (the feed's `replayBatches`), as a restarted or new collector does.
   */
  collectorRestartAtMs?: number;
  /** Called as virtual time advances (progress bar). */
  onProgress?: (virtualMs: number) => void;
}

export interface CellResult {
  records: RequestRecord[];
  windowStartMs: number;
  windowEndMs: number;
  durationMs: number;
  pods: { id: string; steps: number; busyMs: number; preemptions: number; requests: number }[];
  wallMs: number;
}

interface Live {
  prepared: PreparedRequest;
  armReq: ArmRequest;
  decision: ArmDecision;
  pod: SimPod;
  record: RequestRecord;
  outputIds: number[];
  stream: number | null;
}

/**
 * One benchmark cell in virtual time: one arm, one workload, one load profile, one trial. The client
 * follows GuideLLM (Poisson open loop or N concurrent streams, warmup/measure/cooldown, in-flight
 * requests at the end are "incomplete"); the pods are the emulator's engine; an arm picks a pod for each
 * request at the moment the client sends it.
 */
export async function runCell(input: CellInput): Promise<CellResult> {
  const wall0 = performance.now();
  const { arm, pods, profile, latency } = input;
  const jitterRng = latency.jitter
    ? Rng.derive(input.seed, input.trial, 'path-jitter', latency.jitter.stream)
    : null;
  const durationMs = profileDurationS(profile) * 1000;
  const client = new ConversationClient(input.factory);
  const byId = new Map(pods.map((p) => [p.id, p]));
  const live = new Map<string, Live>();
  const inFlight = new Map<string, number>(pods.map((p) => [p.id, 0]));
  const scraped = new Map<string, { waiting: number; kvUsage: number }>();
  const records: RequestRecord[] = [];
  const pendingArrivals: { atMs: number; live: Live }[] = [];
  let restartAtMs = input.collectorRestartAtMs ?? null;
  const kvQueue: { atMs: number; podId: string; events: StepOutcome['kvEvents'] }[] = [];
  const streamStarts: { atMs: number; stream: number }[] = [];
  let now = 0;
  let seq = 0;
  const slots =
    profile.kind === 'poisson'
      ? arrivalSlots({
          ratePerS: profile.rate,
          durationMs,
          process: profile.arrivals ?? 'poisson',
          clientWorkers: profile.clientWorkers ?? GUIDELLM_WORKERS,
          seed: input.seed,
          trial: input.trial,
          workload: input.factory.name,
        })
      : [];
  let nextSlot = 0;
  let nextScrapeMs = 0;
  if (profile.kind === 'concurrent')
    for (let s = 0; s < profile.streams; s++) streamStarts.push({ atMs: 0, stream: s });

  if (input.feed) for (const p of pods) await input.feed.register(p, 0);

  const views = (): PodView[] =>
    pods.map((p) => ({
      id: p.id,
      inFlight: inFlight.get(p.id)!,
      waiting: scraped.get(p.id)?.waiting ?? null,
      kvUsage: scraped.get(p.id)?.kvUsage ?? null,
    }));

  async function send(turn: Turn, stream: number | null, worker: number): Promise<void> {
    const prepared = await prepareRequest(turn, input.model, input.template, input.promptTokenizer);
    const armReq: ArmRequest = {
      key: turn.key,
      body: prepared.body,
      promptTokenIds: prepared.promptTokenIds,
      firstMessageText: prepared.firstMessageText,
      client: worker,
    };
    const decision = await arm.choose(armReq, views(), now);
    if (decision.rejected) {
      // Answered by the gateway (429): an errored request for the client, which waits the Retry-After.
      const endMs = now + latency.requestOverheadMs + latency.responseOverheadMs;
      records.push({
        key: turn.key,
        conversationId: turn.conv.id,
        turnIndex: turn.turn,
        cluster: turn.conv.cluster,
        pod: '',
        status: 'errored',
        startMs: now,
        firstTokenMs: null,
        lastTokenMs: null,
        endMs,
        promptTokens: prepared.promptTokenIds.length,
        outputTokens: 0,
        cachedTokens: 0,
      });
      client.complete(turn, null);
      const next = endMs + decision.rejected.retryAfterMs;
      if (stream !== null && next < durationMs) streamStarts.push({ atMs: next, stream });
      return;
    }
    const pod = byId.get(decision.podId) ?? pods[0]!;
    inFlight.set(pod.id, inFlight.get(pod.id)! + 1);
    const record: RequestRecord = {
      key: turn.key,
      conversationId: turn.conv.id,
      turnIndex: turn.turn,
      cluster: turn.conv.cluster,
      pod: pod.id,
      status: 'incomplete',
      startMs: now,
      firstTokenMs: null,
      lastTokenMs: null,
      endMs: null,
      promptTokens: prepared.promptTokenIds.length,
      outputTokens: 0,
      cachedTokens: 0,
    };
    const l: Live = { prepared, armReq, decision, pod, record, outputIds: [], stream };
    const atMs =
      now +
      (jitterRng ? jitterRng.next() * latency.jitter!.maxMs : 0) +
      latency.requestOverheadMs +
      latency.requestOverheadMsPerToken * record.promptTokens +
      (latency.requestOverheadMsPerTokenizedToken ?? 0) * (decision.tokenizedTokens ?? 0);
    // Keep arrivals ordered (the per-token term makes later sends of short prompts arrive sooner).
    let i = pendingArrivals.length;
    while (i > 0 && pendingArrivals[i - 1]!.atMs > atMs) i--;
    pendingArrivals.splice(i, 0, { atMs, live: l });
    records.push(record);
  }

  function deliverStep(pod: SimPod, s: StepOutcome): void {
    pod.noteStep(s);
    if (input.feed && s.kvEvents.length)
      kvQueue.push({ atMs: s.endMs + latency.kvEventDelayMs, podId: pod.id, events: s.kvEvents });
    const at = s.endMs + latency.responseOverheadMs;
    for (const t of s.tokens) {
      const l = live.get(t.requestId);
      if (!l) continue;
      if (t.first) {
        l.record.firstTokenMs = at;
        l.record.cachedTokens = t.cachedTokens;
      }
      l.record.lastTokenMs = at;
      l.outputIds.push(...t.tokenIds);
      l.record.outputTokens = l.outputIds.length;
    }
  }

  async function finish(pod: SimPod, s: StepOutcome): Promise<void> {
    const at = s.endMs + latency.responseOverheadMs;
    for (const f of s.finished) {
      const l = live.get(f.requestId);
      if (!l) continue;
      live.delete(f.requestId);
      inFlight.set(pod.id, inFlight.get(pod.id)! - 1);
      l.record.status = f.reason === 'abort' ? 'errored' : 'successful';
      l.record.endMs = at;
      const ttft = (l.record.firstTokenMs ?? at) - l.record.startMs;
      arm.onComplete?.(l.decision, l.armReq, at, at - l.record.startMs, ttft);
      const reply = l.outputIds.map((id) => input.wordOf.get(id) ?? '').join('');
      client.complete(l.prepared.turn, l.record.status === 'successful' ? reply : null);
      if (l.stream !== null && at < durationMs) streamStarts.push({ atMs: at, stream: l.stream });
    }
  }

  for (;;) {
    let tEngine = Number.POSITIVE_INFINITY;
    for (const p of pods) {
      const t = p.engine.nextEventTimeMs();
      if (t !== null && t < tEngine) tEngine = t;
    }
    const tArrive = pendingArrivals[0]?.atMs ?? Number.POSITIVE_INFINITY;
    const tKv = kvQueue[0]?.atMs ?? Number.POSITIVE_INFINITY;
    const tStream = streamStarts.length
      ? Math.min(...streamStarts.map((s) => s.atMs))
      : Number.POSITIVE_INFINITY;
    const tScrape = input.feed || arm.name === 'approx-prefix' ? nextScrapeMs : Number.POSITIVE_INFINITY;
    const tSlot = slots[nextSlot]?.atMs ?? Number.POSITIVE_INFINITY;
    const tRestart = input.feed && restartAtMs !== null ? restartAtMs : Number.POSITIVE_INFINITY;
    const t = Math.min(tEngine, tArrive, tKv, tStream, tScrape, tSlot, tRestart);
    if (!(t <= durationMs)) break;
    now = t;
    input.onProgress?.(now);

    if (tEngine === t) {
      for (const p of pods) {
        if (p.engine.nextEventTimeMs() !== t) continue;
        for (const o of p.engine.advanceTo(t)) {
          if (o.kind !== 'step') continue;
          deliverStep(p, o);
          await finish(p, o);
        }
      }
      continue;
    }
    if (tRestart === t) {
      restartAtMs = null;
      await input.feed!.restart(t);
      continue;
    }
    if (tKv === t) {
      const b = kvQueue.shift()!;
      await input.feed!.applyKvBatch(b.podId, b.events, t);
      continue;
    }
    if (tScrape === t) {
      for (const p of pods) {
        scraped.set(p.id, { waiting: p.engine.numWaiting, kvUsage: p.engine.kvUsage });
        if (input.feed) await input.feed.scrape(p, t);
      }
      nextScrapeMs += latency.scrapeIntervalMs;
      continue;
    }
    if (tArrive === t) {
      const { live: l } = pendingArrivals.shift()!;
      const id = `r${seq++}`;
      live.set(id, l);
      l.pod.ledger.set(id, {
        promptTokens: l.prepared.promptTokenIds.length,
        maxTokens: l.prepared.maxTokens,
        computed: 0,
        outputs: 0,
        admitted: false,
        blockHashes: input.trackBlockHashes ? blockHashesOn(l.pod, l.prepared.promptTokenIds) : null,
      });
      const r = l.pod.engine.addRequest(
        {
          id,
          promptTokenIds: l.prepared.promptTokenIds,
          maxTokens: l.prepared.maxTokens,
          ignoreEos: true,
          ...(l.decision.kvReuseReport ? { kvCacheReportMode: 'full' } : {}),
        },
        t,
      );
      if (!r.ok) {
        live.delete(id);
        l.pod.ledger.delete(id);
        inFlight.set(l.pod.id, inFlight.get(l.pod.id)! - 1);
        l.record.status = 'errored';
        l.record.endMs = t;
        client.complete(l.prepared.turn, null);
      }
      continue;
    }
    if (tStream === t) {
      const i = streamStarts.findIndex((s) => s.atMs === t);
      const { stream } = streamStarts.splice(i, 1)[0]!;
      const worker = profile.kind === 'concurrent' ? workerOfStream(profile, stream) : 0;
      await send(await client.next(worker), stream, worker);
      continue;
    }
    if (tSlot === t) {
      const slot = slots[nextSlot++]!;
      await send(await client.next(slot.worker), null, slot.worker);
    }
  }

  return {
    records,
    windowStartMs: profile.warmupS * 1000,
    windowEndMs: durationMs - profile.cooldownS * 1000,
    durationMs,
    pods: pods.map((p) => ({
      id: p.id,
      steps: p.stepCount,
      busyMs: p.busyMs,
      preemptions: p.preemptions,
      requests: records.filter((r) => r.pod === p.id).length,
    })),
    wallMs: performance.now() - wall0,
  };
}

function blockHashesOn(pod: SimPod, ids: readonly number[]): string[] {
  const h = new RequestBlockHasher(pod.engine.noneHash, pod.engine.blockSize, null, null);
  h.update([...ids]);
  return [...h.hashes];
}
