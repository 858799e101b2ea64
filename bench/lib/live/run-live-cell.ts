import { Rng } from '../rng.js';
import type { ModelSetup } from '../setup.js';
import { clientRandomRouter, kubeProxyArm } from '../arms/kube-proxy.js';
import { randomArm as randomPerRequest } from '../arms/simple.js';
import {
  GUIDELLM_WORKERS,
  profileDurationS,
  type Profile,
  type RandomRouting,
  type RequestRecord,
  workerOfStream,
} from '../types.js';
import { arrivalSlots } from '../workload/arrivals.js';
import { ConversationClient } from '../workload/client.js';
import { chatBody } from '../workload/prepare.js';
import type { WorkloadFactory } from '../workload/workloads.js';
import { streamChat, type StreamTiming } from './http-client.js';
import { podsServed, type LiveStack } from './stack.js';

export type LiveArm = 'random' | 'kinference' | 'kinference-slo';

export interface LiveCellResult {
  records: RequestRecord[];
  windowStartMs: number;
  windowEndMs: number;
  durationMs: number;
  wallMs: number;
}

/**
 * One cell against real processes. Open loop: the same arrival schedule as the discrete-event run (in
 * virtual time, slept for t / timeScale). Concurrent: N streams, each sending its next
 * request when the previous ended, or the Retry-After after a 429 (as the DES client does). Every client
 * timestamp is multiplied back by timeScale, so results read in the same units as the DES. random = the
 * client sends straight to the pod the DES's random arm would pick (kube-proxy per connection or per
 * request, same seeded stream); kinference = through the Kong stand-in and the plugin;
 * kinference-slo = the stand-in's route whose plugin has admission control.
 */
export async function runLiveCell(o: {
  arm: LiveArm;
  stack: LiveStack;
  factory: WorkloadFactory;
  profile: Profile;
  timeScale: number;
  model: ModelSetup;
  seed: number;
  trial: number;
  randomRouting?: RandomRouting;
}): Promise<LiveCellResult> {
  const k = o.timeScale;
  const durationMs = profileDurationS(o.profile) * 1000;
  const client = new ConversationClient(o.factory);
  // The same stream as the DES random arm (des/cell-setup.ts), so both modes make the same picks in order.
  const pick = Rng.derive(o.seed, o.trial, 'arm', 'random');
  const randomArm = clientRandomRouter(
    o.randomRouting === 'per-connection' ? kubeProxyArm(pick) : randomPerRequest(pick),
    o.stack.pods.map((p) => p.id),
  );
  const records: RequestRecord[] = [];
  /** Gateway requests by Kong request id: their pod is read from the gateway's file-log afterwards. */
  const viaGatewayIds = new Map<string, RequestRecord>();
  const inflight = new Set<Promise<void>>();
  const t0 = performance.now();
  const virt = (realMs: number): number => (realMs - t0) * k;

  const viaGateway = o.arm !== 'random';
  const path = o.arm === 'kinference-slo' ? (o.stack.sloPath ?? undefined) : undefined;
  if (o.arm === 'kinference-slo' && !path)
    throw new Error('kinference-slo needs a stack started with admission');
  /**
   * One request from client worker `worker` (its conversations, its connection pool); resolves with the
   * Retry-After in real ms when the gateway answered 429.
   */
  const sendOne = async (worker: number): Promise<number | null> => {
    const turn = await client.next(worker);
    const body = chatBody(turn, o.model.model);
    // random: the same choice as the DES arm (per request, or kube-proxy per keep-alive connection).
    const route = viaGateway ? null : randomArm.choose(worker, virt(performance.now()));
    const target = route
      ? o.stack.pods.find((p) => p.id === route.podId)!
      : { id: 'gateway', ...o.stack.gateway };
    const rec: RequestRecord = {
      key: turn.key,
      conversationId: turn.conv.id,
      turnIndex: turn.turn,
      cluster: turn.conv.cluster,
      pod: target.id,
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
    const t: StreamTiming = await streamChat(target.host, target.port, body, path);
    if (viaGateway && t.requestId !== null && t.status !== 429) viaGatewayIds.set(t.requestId, rec);
    rec.startMs = virt(t.startMs);
    rec.promptTokens = t.promptTokens;
    rec.outputTokens = t.outputTokens;
    rec.cachedTokens = t.cachedTokens;
    if (t.ok) {
      rec.firstTokenMs = virt(t.firstTokenMs!);
      rec.lastTokenMs = virt(t.lastTokenMs!);
    }
    // GuideLLM: requests still running when the run ends are incomplete.
    if (virt(t.endMs) > durationMs) {
      client.complete(turn, null);
      return null;
    }
    rec.endMs = virt(t.endMs);
    if (route) randomArm.release(route, worker, rec.endMs);
    rec.status = t.ok ? 'successful' : 'errored';
    if (t.status === 429) rec.pod = ''; // answered by the gateway, as in the DES
    client.complete(turn, t.ok ? t.text : null);
    return t.status === 429 && t.retryAfterS !== null ? (t.retryAfterS * 1000) / k : null;
  };
  const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

  if (o.profile.kind === 'poisson') {
    const slots = arrivalSlots({
      ratePerS: o.profile.rate,
      durationMs,
      process: o.profile.arrivals ?? 'poisson',
      clientWorkers: o.profile.clientWorkers ?? GUIDELLM_WORKERS,
      seed: o.seed,
      trial: o.trial,
      workload: o.factory.name,
    });
    for (const slot of slots) {
      const wait = slot.atMs / k - (performance.now() - t0);
      if (wait > 0) await sleep(wait);
      const p = sendOne(slot.worker)
        .then(() => undefined)
        .finally(() => inflight.delete(p));
      inflight.add(p);
    }
  } else {
    const profile = o.profile;
    for (let i = 0; i < profile.streams; i++) {
      const p = (async (): Promise<void> => {
        while (virt(performance.now()) < durationMs) {
          const retryMs = await sendOne(workerOfStream(profile, i));
          if (retryMs !== null) await sleep(retryMs);
        }
      })().finally(() => inflight.delete(p));
      inflight.add(p);
    }
  }
  const endWait = durationMs / k - (performance.now() - t0);
  if (endWait > 0) await new Promise((r) => setTimeout(r, endWait));
  // Let stragglers finish (already counted incomplete) so the next arm starts on idle pods.
  await Promise.all([...inflight]);
  if (viaGatewayIds.size > 0) {
    const served = await podsServed(o.stack, [...viaGatewayIds.keys()]);
    for (const [id, rec] of viaGatewayIds) rec.pod = served.get(id) ?? rec.pod;
  }
  return {
    records,
    windowStartMs: o.profile.warmupS * 1000,
    windowEndMs: durationMs - o.profile.cooldownS * 1000,
    durationMs,
    wallMs: performance.now() - t0,
  };
}
