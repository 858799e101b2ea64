// The discrete-event engine loop of every virtual-time run: clients, one arm, the pods, the collector feed.
import { RequestBlockHasher } from '../../../emulator/engine/block-hash.js';
import type { StepOutcome } from '../../../emulator/engine/types.js';
import type { CallerFacts } from '../../../src/policies/index.js';
import type { ChatTemplate, PromptTokenizer } from '../../../src/tokenize/types.js';
import type { Arm, ArmDecision, ArmRequest, PodView } from '../arms/types.js';
import { Rng } from '../rng.js';
import type { Profile, RequestRecord } from '../types.js';
import { GUIDELLM_WORKERS, workerOfStream } from '../types.js';
import { ConversationClient, type Turn } from '../workload/client.js';
import { arrivalSlots, type ArrivalSlot } from '../workload/arrivals.js';
import { prepareRequest, type PreparedRequest } from '../workload/prepare.js';
import type { WorkloadFactory } from '../workload/workloads.js';
import type { CollectorFeed } from './feed.js';
import type { SimPod } from './pod.js';

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

/** One client of the run: its workload, its load (open loop or streams), and who Kong says it is. */
export interface LoopSource {
  /** The tenant's name, prefixed to request keys and conversation ids; null: the run's only client. */
  name: string | null;
  factory: WorkloadFactory;
  /** Its windows are ignored: the run's `windows` apply to every source. */
  profile: Profile;
  caller?: CallerFacts | null;
}

/** One request of the run, with its tenant and, when the gateway answered it, who refused it. */
export interface LoopRecord extends RequestRecord {
  tenant: string | null;
  rejectedBy: NonNullable<ArmDecision['rejected']>['by'] | null;
  trace: ArmDecision['trace'] | null;
  /** How long it waited in the gateway for capacity (class admission's max_wait_ms), virtual ms. */
  waitedMs: number;
}

/** What every virtual-time run shares, whatever its clients: the arm, the fleet, the path and the seed. */
export interface RunSetup {
  arm: Arm;
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
  /** Called as virtual time advances (progress bar; the arms' clock). */
  onProgress?: (virtualMs: number) => void;
}

export interface LoopInput extends RunSetup {
  sources: LoopSource[];
  windows: { warmupS: number; measureS: number; cooldownS: number };
  /** The oracle needs each prompt's engine block hashes on its pod. */
  trackBlockHashes?: boolean;
  /**
   * The collector restarts at this virtual time (ms): every pod is cleared and rebuilt from its replay buffer
   * (the feed's `replayBatches`), as a restarted or new collector does.
   */
  collectorRestartAtMs?: number;
  /** Scrape the pods' metrics even without a collector feed (arms that read them: approx-prefix). */
  scrapeWithoutFeed?: boolean;
}

export interface LoopResult {
  records: LoopRecord[];
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
  record: LoopRecord;
  outputIds: number[];
  source: number;
  stream: number | null;
}

/** A request answered 429 sent again after its Retry-After by a client that honours it (ClientShape.retry429). */
interface Retry {
  turn: Turn;
  attempt: number;
  firstSentMs: number;
  worker: number;
}

/** A request waiting in the gateway for capacity (the arm decided `wait`), until it is placed or its time is up. */
interface Waiter {
  source: number;
  /** The client worker that sent it, and which retry of a request answered 429 this is (absent: the first). */
  worker: number;
  retry?: Retry;
  turn: Turn;
  prepared: PreparedRequest;
  armReq: ArmRequest;
  stream: number | null;
  sentMs: number;
  decision: ArmDecision;
  seq: number;
}

/**
 * While requests wait, the head re-decides at least this often (the plugin's FairQueue poll, pollMs): capacity
 * also frees without a response ending (a prefill completes, a reservation ages out).
 */
const WAIT_POLL_MS = 100;

/**
 * The engine loop in virtual time: GuideLLM's client per source (Poisson open loop or N concurrent streams,
 * warmup/measure/cooldown; in-flight requests at the end are "incomplete"), one arm deciding for every request
 * when its client sends it, the emulator's engine as the pods, the collector's feed. A 429 ends the request
 * for its client (a conversation ends there); a stream waits the Retry-After before its next request.
 * A `wait` decision (class admission's max_wait_ms) holds the request in the gateway: the head waiter
 * re-decides when a response ends, every WAIT_POLL_MS and, forced to decide, at its deadline, as the plugin's
 * access phase does with the router's FairQueue. Waiters take turns by priority, then arrival (one that waits
 * again goes behind the others, as in the queue): the queue's
 * within-band order by virtual token counters is not modelled here (it needs two tenants waiting in one band).
 */
export async function runEventLoop(input: LoopInput): Promise<LoopResult> {
  const wall0 = performance.now();
  const { arm, pods, latency } = input;
  const jitterRng = latency.jitter
    ? Rng.derive(input.seed, input.trial, 'path-jitter', latency.jitter.stream)
    : null;
  const durationMs = (input.windows.warmupS + input.windows.measureS + input.windows.cooldownS) * 1000;
  const clients = input.sources.map((t) => new ConversationClient(t.factory));
  const byId = new Map(pods.map((p) => [p.id, p]));
  const live = new Map<string, Live>();
  const inFlight = new Map<string, number>(pods.map((p) => [p.id, 0]));
  const scraped = new Map<string, { waiting: number; kvUsage: number }>();
  const records: LoopRecord[] = [];
  const pendingArrivals: { atMs: number; live: Live }[] = [];
  let restartAtMs = input.collectorRestartAtMs ?? null;
  const kvQueue: { atMs: number; podId: string; events: StepOutcome['kvEvents'] }[] = [];
  /** A stream's next send, or (retry) a request answered 429 sent again after its Retry-After. */
  const streamStarts: { atMs: number; source: number; stream: number | null; retry?: Retry }[] = [];
  const waiters: Waiter[] = [];
  let wakeAtMs = Number.POSITIVE_INFINITY;
  let waitSeq = 0;
  // Every source's open-loop slots, merged in time order.
  const slots: (ArrivalSlot & { source: number })[] = [];
  input.sources.forEach((t, source) => {
    const p = t.profile;
    if (p.kind === 'concurrent')
      for (let s = 0; s < p.streams; s++) streamStarts.push({ atMs: 0, source, stream: s });
    else
      for (const slot of arrivalSlots({
        ratePerS: p.rate,
        durationMs,
        process: p.arrivals ?? 'poisson',
        clientWorkers: p.clientWorkers ?? GUIDELLM_WORKERS,
        seed: input.seed,
        trial: input.trial,
        workload: t.name === null ? t.factory.name : `${t.name}:${t.factory.name}`,
      }))
        slots.push({ ...slot, source });
  });
  slots.sort((a, b) => a.atMs - b.atMs);
  let now = 0;
  let seq = 0;
  let nextSlot = 0;
  let nextScrapeMs = 0;

  if (input.feed) for (const p of pods) await input.feed.register(p, 0);

  const views = (): PodView[] =>
    pods.map((p) => ({
      id: p.id,
      inFlight: inFlight.get(p.id)!,
      waiting: scraped.get(p.id)?.waiting ?? null,
      kvUsage: scraped.get(p.id)?.kvUsage ?? null,
    }));

  async function send(
    source: number,
    turn: Turn,
    stream: number | null,
    worker: number,
    retry?: Retry,
  ): Promise<void> {
    const tenant = input.sources[source]!;
    const prepared = await prepareRequest(turn, input.model, input.template, input.promptTokenizer);
    // A retry is its own request (its own record); its key keeps the pairing of first attempts intact.
    const turnKey = retry ? `${turn.key}#retry${retry.attempt}` : turn.key;
    const armReq: ArmRequest = {
      key: tenant.name === null ? turnKey : `${tenant.name}/${turnKey}`,
      body: prepared.body,
      promptTokenIds: prepared.promptTokenIds,
      firstMessageText: prepared.firstMessageText,
      client: worker,
      ...(tenant.caller !== undefined ? { caller: tenant.caller } : {}),
    };
    const decision = await arm.choose(armReq, views(), now);
    const w: Waiter = {
      source,
      worker,
      ...(retry ? { retry } : {}),
      turn,
      prepared,
      armReq,
      stream,
      sentMs: now,
      decision,
      seq: waitSeq++,
    };
    if (decision.wait) enqueue(w);
    else dispatch(w);
  }

  /** Holds a request in the gateway, in turn order (priority, then arrival). */
  function enqueue(w: Waiter): void {
    const pri = w.decision.wait!.priority;
    let i = waiters.length;
    while (i > 0 && (waiters[i - 1]!.decision.wait!.priority < pri || waiters[i - 1]!.seq > w.seq)) i--;
    waiters.splice(i, 0, w);
    if (wakeAtMs === Number.POSITIVE_INFINITY) wakeAtMs = now + WAIT_POLL_MS;
  }

  /** A waiter decides again now; true when it left the queue (placed, shed or served past its objective). */
  async function redecide(w: Waiter): Promise<boolean> {
    waiters.splice(waiters.indexOf(w), 1);
    w.decision = await arm.redecide!(w.armReq, w.decision, now, now - w.sentMs);
    if (w.decision.wait) {
      // It waits again as a new waiter (FairQueue.wait): behind the others of its band, so the next wake
      // tries another request, one that may fit where this one did not.
      w.seq = waitSeq++;
      enqueue(w);
      return false;
    }
    dispatch(w);
    return true;
  }

  /** Sends a decided request: the gateway's own answer (429), or the path to its pod. */
  function dispatch(w: Waiter): void {
    const { source, turn, prepared, armReq, stream, decision } = w;
    const tenant = input.sources[source]!;
    const base = {
      key: armReq.key,
      tenant: tenant.name,
      conversationId: tenant.name === null ? turn.conv.id : `${tenant.name}/${turn.conv.id}`,
      turnIndex: turn.turn,
      cluster: turn.conv.cluster,
      startMs: w.sentMs,
      firstTokenMs: null,
      lastTokenMs: null,
      promptTokens: prepared.promptTokenIds.length,
      outputTokens: 0,
      cachedTokens: 0,
      trace: decision.trace ?? null,
      waitedMs: now - w.sentMs,
      ...(w.retry ? { attempt: w.retry.attempt, firstSentMs: w.retry.firstSentMs } : {}),
    };
    if (decision.rejected) {
      // Answered by the gateway (429): an errored request for the client, which waits the Retry-After.
      const endMs = now + latency.requestOverheadMs + latency.responseOverheadMs;
      records.push({
        ...base,
        pod: '',
        status: 'errored',
        endMs,
        rejectedBy: decision.rejected.by ?? 'shed',
      });
      const next = endMs + decision.rejected.retryAfterMs;
      const attempt = w.retry?.attempt ?? 0;
      if (attempt < (tenant.profile.retry429 ?? 0)) {
        // A client honouring Retry-After sends the same request again then (a stream waits for it).
        if (next < durationMs) {
          const firstSentMs = w.retry?.firstSentMs ?? w.sentMs;
          const again = { turn, attempt: attempt + 1, firstSentMs, worker: w.worker };
          streamStarts.push({ atMs: next, source, stream, retry: again });
        } else clients[source]!.complete(turn, null);
        return;
      }
      clients[source]!.complete(turn, null);
      if (stream !== null && next < durationMs) streamStarts.push({ atMs: next, source, stream });
      return;
    }
    const pod = byId.get(decision.podId) ?? pods[0]!;
    inFlight.set(pod.id, inFlight.get(pod.id)! + 1);
    const record: LoopRecord = { ...base, pod: pod.id, status: 'incomplete', endMs: null, rejectedBy: null };
    const l: Live = { prepared, armReq, decision, pod, record, outputIds: [], source, stream };
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

  function finish(pod: SimPod, s: StepOutcome): void {
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
      clients[l.source]!.complete(l.prepared.turn, l.record.status === 'successful' ? reply : null);
      if (l.stream !== null && at < durationMs)
        streamStarts.push({ atMs: at, source: l.source, stream: l.stream });
      // The plugin's log phase wakes the head waiter: capacity freed.
      if (waiters.length) wakeAtMs = Math.min(wakeAtMs, at);
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
    const tScrape = input.feed || input.scrapeWithoutFeed ? nextScrapeMs : Number.POSITIVE_INFINITY;
    const tSlot = slots[nextSlot]?.atMs ?? Number.POSITIVE_INFINITY;
    const tRestart = input.feed && restartAtMs !== null ? restartAtMs : Number.POSITIVE_INFINITY;
    let tWait = wakeAtMs;
    for (const w of waiters) tWait = Math.min(tWait, w.decision.wait!.untilMs);
    const t = Math.min(tEngine, tArrive, tKv, tStream, tScrape, tSlot, tRestart, tWait);
    if (!(t <= durationMs)) break;
    now = t;
    input.onProgress?.(now);

    if (tEngine === t) {
      for (const p of pods) {
        if (p.engine.nextEventTimeMs() !== t) continue;
        for (const o of p.engine.advanceTo(t)) {
          if (o.kind !== 'step') continue;
          deliverStep(p, o);
          finish(p, o);
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
        clients[l.source]!.complete(l.prepared.turn, null);
      }
      continue;
    }
    if (tStream === t) {
      const i = streamStarts.findIndex((s) => s.atMs === t);
      const { source, stream, retry } = streamStarts.splice(i, 1)[0]!;
      if (retry) await send(source, retry.turn, stream, retry.worker, retry);
      else {
        const p = input.sources[source]!.profile;
        const worker = p.kind === 'concurrent' && stream !== null ? workerOfStream(p, stream) : 0;
        await send(source, await clients[source]!.next(worker), stream, worker);
      }
      continue;
    }
    if (tSlot === t) {
      const slot = slots[nextSlot++]!;
      await send(slot.source, await clients[slot.source]!.next(slot.worker), null, slot.worker);
      continue;
    }
    // tWait === t: waiters past their deadline decide for good (placed, shed or served past the objective);
    // on a wake, the head re-decides, and each waiter placed wakes the next (the router's wake after a wait).
    for (const w of waiters.filter((x) => x.decision.wait!.untilMs <= t)) await redecide(w);
    if (wakeAtMs <= t) {
      while (waiters.length && (await redecide(waiters[0]!)));
      wakeAtMs = waiters.length ? t + WAIT_POLL_MS : Number.POSITIVE_INFINITY;
    }
  }

  // Still waiting in the gateway at the end: sent, not answered (GuideLLM's incomplete), as in flight.
  for (const w of waiters) {
    const tenant = input.sources[w.source]!;
    records.push({
      key: w.armReq.key,
      tenant: tenant.name,
      conversationId: tenant.name === null ? w.turn.conv.id : `${tenant.name}/${w.turn.conv.id}`,
      turnIndex: w.turn.turn,
      cluster: w.turn.conv.cluster,
      pod: '',
      status: 'incomplete',
      startMs: w.sentMs,
      firstTokenMs: null,
      lastTokenMs: null,
      endMs: null,
      promptTokens: w.prepared.promptTokenIds.length,
      outputTokens: 0,
      cachedTokens: 0,
      trace: w.decision.trace ?? null,
      waitedMs: now - w.sentMs,
      rejectedBy: null,
    });
  }
  return {
    records,
    windowStartMs: input.windows.warmupS * 1000,
    windowEndMs: durationMs - input.windows.cooldownS * 1000,
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
