import { Rng } from '../rng.js';
import type { ModelSetup } from '../setup.js';
import { profileDurationS, type Profile, type RequestRecord } from '../types.js';
import { ConversationClient } from '../workload/client.js';
import { chatBody } from '../workload/prepare.js';
import type { WorkloadFactory } from '../workload/workloads.js';
import { streamChat, type StreamTiming } from './http-client.js';
import type { LiveStack } from './stack.js';

export type LiveArm = 'random' | 'kinference';

export interface LiveCellResult {
  records: RequestRecord[];
  windowStartMs: number;
  windowEndMs: number;
  durationMs: number;
  wallMs: number;
}

/**
 * One Poisson cell against real processes. Arrival gaps are drawn in virtual time with the same seeded
 * stream as the discrete-event run and slept for gap / timeScale; every client timestamp is multiplied back
 * by timeScale, so results read in the same units as the DES. random = the client picks a pod uniformly
 * (kube-proxy); kinference = through the Kong stand-in and the plugin.
 */
export async function runLiveCell(o: {
  arm: LiveArm;
  stack: LiveStack;
  factory: WorkloadFactory;
  profile: Extract<Profile, { kind: 'poisson' }>;
  timeScale: number;
  model: ModelSetup;
  seed: number;
  trial: number;
}): Promise<LiveCellResult> {
  const k = o.timeScale;
  const durationMs = profileDurationS(o.profile) * 1000;
  const client = new ConversationClient(o.factory);
  const arrivals = Rng.derive(o.seed, o.trial, 'arrivals', o.factory.name);
  // The same stream as the DES random arm (des/cell-setup.ts), so both modes make the same picks in order.
  const pick = Rng.derive(o.seed, o.trial, 'arm', 'random');
  const records: RequestRecord[] = [];
  const inflight = new Set<Promise<void>>();
  const t0 = performance.now();
  const virt = (realMs: number): number => (realMs - t0) * k;

  const sendOne = async (): Promise<void> => {
    const turn = await client.next();
    const body = chatBody(turn, o.model.model);
    const target = o.arm === 'kinference' ? { id: 'gateway', ...o.stack.gateway } : pick.pick(o.stack.pods);
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
    const t: StreamTiming = await streamChat(target.host, target.port, body);
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
      return;
    }
    rec.endMs = virt(t.endMs);
    rec.status = t.ok ? 'successful' : 'errored';
    client.complete(turn, t.ok ? t.text : null);
  };

  let nextV = arrivals.exponential(o.profile.rate / 1000);
  while (nextV <= durationMs) {
    const wait = nextV / k - (performance.now() - t0);
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const p = sendOne().finally(() => inflight.delete(p));
    inflight.add(p);
    nextV += arrivals.exponential(o.profile.rate / 1000);
  }
  const endWait = durationMs / k - (performance.now() - t0);
  if (endWait > 0) await new Promise((r) => setTimeout(r, endWait));
  // Let stragglers finish (already counted incomplete) so the next arm starts on idle pods.
  await Promise.all([...inflight]);
  return {
    records,
    windowStartMs: o.profile.warmupS * 1000,
    windowEndMs: durationMs - o.profile.cooldownS * 1000,
    durationMs,
    wallMs: performance.now() - t0,
  };
}
