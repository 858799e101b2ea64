// Runs several tenants' workloads at once on one fleet in virtual time (the mixed-tenant benchmark).
import type { StepOutcome } from '../../../emulator/engine/types.js';
import type { CallerFacts } from '../../../src/policies/index.js';
import type { ChatTemplate, PromptTokenizer } from '../../../src/tokenize/types.js';
import type { Arm, ArmDecision, ArmRequest, PodView } from '../arms/types.js';
import type { Profile, RequestRecord } from '../types.js';
import { GUIDELLM_WORKERS, workerOfStream } from '../types.js';
import { ConversationClient, type Turn } from '../workload/client.js';
import { arrivalSlots, type ArrivalSlot } from '../workload/arrivals.js';
import { prepareRequest, type PreparedRequest } from '../workload/prepare.js';
import type { WorkloadFactory } from '../workload/workloads.js';
import type { CollectorFeed } from './feed.js';
import type { PathLatency } from './run-cell.js';
import type { SimPod } from './pod.js';

/** One tenant of the mix: its workload, its load (open loop or streams), and who Kong says it is. */
export interface TenantSource {
  name: string;
  factory: WorkloadFactory;
  /** Its windows are ignored: the mix's `windows` apply to every tenant. */
  profile: Profile;
  caller: CallerFacts;
}

/** One request of the mix, with its tenant and, when the gateway answered it, who refused it. */
export interface MixedRecord extends RequestRecord {
  tenant: string;
  rejectedBy: NonNullable<ArmDecision['rejected']>['by'] | null;
  trace: ArmDecision['trace'] | null;
}

export interface MixedInput {
  arm: Arm;
  tenants: TenantSource[];
  windows: { warmupS: number; measureS: number; cooldownS: number };
  pods: SimPod[];
  model: string;
  template: ChatTemplate;
  promptTokenizer: PromptTokenizer;
  wordOf: ReadonlyMap<number, string>;
  latency: PathLatency;
  seed: number;
  trial: number;
  feed: CollectorFeed | null;
  onProgress?: (virtualMs: number) => void;
}

export interface MixedResult {
  records: MixedRecord[];
  windowStartMs: number;
  windowEndMs: number;
  pods: { id: string; busyMs: number; preemptions: number }[];
  wallMs: number;
}

interface Live {
  prepared: PreparedRequest;
  armReq: ArmRequest;
  decision: ArmDecision;
  pod: SimPod;
  record: MixedRecord;
  outputIds: number[];
  source: number;
  stream: number | null;
}

/**
 * The tenants of a mix, each with GuideLLM's client (its own conversations, open-loop slots or streams),
 * sharing one fleet and one arm, in virtual time. The engine loop is run-cell.ts's; what differs is that
 * every event belongs to a tenant, and the arm sees the tenant's caller facts. A 429 ends the request for
 * its client (a conversation ends there); a stream waits the Retry-After before its next request.
 */
export async function runMixed(input: MixedInput): Promise<MixedResult> {
  const wall0 = performance.now();
  const { arm, pods, latency } = input;
  const durationMs = (input.windows.warmupS + input.windows.measureS + input.windows.cooldownS) * 1000;
  const clients = input.tenants.map((t) => new ConversationClient(t.factory));
  const byId = new Map(pods.map((p) => [p.id, p]));
  const live = new Map<string, Live>();
  const inFlight = new Map<string, number>(pods.map((p) => [p.id, 0]));
  const scraped = new Map<string, { waiting: number; kvUsage: number }>();
  const records: MixedRecord[] = [];
  const pendingArrivals: { atMs: number; live: Live }[] = [];
  const kvQueue: { atMs: number; podId: string; events: StepOutcome['kvEvents'] }[] = [];
  const streamStarts: { atMs: number; source: number; stream: number }[] = [];
  // Every tenant's open-loop slots, merged in time order.
  const slots: (ArrivalSlot & { source: number })[] = [];
  input.tenants.forEach((t, source) => {
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
        workload: `${t.name}:${t.factory.name}`,
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

  async function send(source: number, turn: Turn, stream: number | null, worker: number): Promise<void> {
    const tenant = input.tenants[source]!;
    const prepared = await prepareRequest(turn, input.model, input.template, input.promptTokenizer);
    const armReq: ArmRequest = {
      key: `${tenant.name}/${turn.key}`,
      body: prepared.body,
      promptTokenIds: prepared.promptTokenIds,
      firstMessageText: prepared.firstMessageText,
      client: worker,
      caller: tenant.caller,
    };
    const decision = await arm.choose(armReq, views(), now);
    const base = {
      key: armReq.key,
      tenant: tenant.name,
      conversationId: `${tenant.name}/${turn.conv.id}`,
      turnIndex: turn.turn,
      cluster: turn.conv.cluster,
      startMs: now,
      firstTokenMs: null,
      lastTokenMs: null,
      promptTokens: prepared.promptTokenIds.length,
      outputTokens: 0,
      cachedTokens: 0,
      trace: decision.trace ?? null,
    };
    if (decision.rejected) {
      const endMs = now + latency.requestOverheadMs + latency.responseOverheadMs;
      records.push({
        ...base,
        pod: '',
        status: 'errored',
        endMs,
        rejectedBy: decision.rejected.by ?? 'shed',
      });
      clients[source]!.complete(turn, null);
      const next = endMs + decision.rejected.retryAfterMs;
      if (stream !== null && next < durationMs) streamStarts.push({ atMs: next, source, stream });
      return;
    }
    const pod = byId.get(decision.podId) ?? pods[0]!;
    inFlight.set(pod.id, inFlight.get(pod.id)! + 1);
    const record: MixedRecord = { ...base, pod: pod.id, status: 'incomplete', endMs: null, rejectedBy: null };
    const l: Live = { prepared, armReq, decision, pod, record, outputIds: [], source, stream };
    const atMs =
      now +
      latency.requestOverheadMs +
      latency.requestOverheadMsPerToken * record.promptTokens +
      (latency.requestOverheadMsPerTokenizedToken ?? 0) * (decision.tokenizedTokens ?? 0);
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
    const tScrape = input.feed ? nextScrapeMs : Number.POSITIVE_INFINITY;
    const tSlot = slots[nextSlot]?.atMs ?? Number.POSITIVE_INFINITY;
    const t = Math.min(tEngine, tArrive, tKv, tStream, tScrape, tSlot);
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
        blockHashes: null,
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
      const { source, stream } = streamStarts.splice(i, 1)[0]!;
      const p = input.tenants[source]!.profile;
      const worker = p.kind === 'concurrent' ? workerOfStream(p, stream) : 0;
      await send(source, await clients[source]!.next(worker), stream, worker);
      continue;
    }
    if (tSlot === t) {
      const slot = slots[nextSlot++]!;
      await send(slot.source, await clients[slot.source]!.next(slot.worker), null, slot.worker);
    }
  }

  return {
    records,
    windowStartMs: input.windows.warmupS * 1000,
    windowEndMs: durationMs - input.windows.cooldownS * 1000,
    pods: pods.map((p) => ({ id: p.id, busyMs: p.busyMs, preemptions: p.preemptions })),
    wallMs: performance.now() - wall0,
  };
}
