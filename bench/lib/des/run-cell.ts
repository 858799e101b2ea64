// Runs one benchmark cell in virtual time: one arm, workload, load profile and trial, GuideLLM's client.
import type { Profile, RequestRecord } from '../types.js';
import type { WorkloadFactory } from '../workload/workloads.js';
import { runEventLoop, type LoopInput, type LoopResult, type RunSetup } from './event-loop.js';

export type { PathLatency } from './event-loop.js';

export interface CellInput extends RunSetup, Pick<LoopInput, 'collectorRestartAtMs'> {
  factory: WorkloadFactory;
  profile: Profile;
  /** The oracle needs each prompt's engine block hashes on its pod. */
  trackBlockHashes: boolean;
}

export interface CellResult extends Omit<LoopResult, 'records'> {
  records: RequestRecord[];
}

/**
 * One benchmark cell in virtual time: one arm, one workload, one load profile, one trial (the event loop
 * with a single client and no tenant). The client follows GuideLLM (Poisson open loop or N concurrent
 * streams, warmup/measure/cooldown, in-flight requests at the end are "incomplete"); the pods are the
 * emulator's engine; an arm picks a pod for each request at the moment the client sends it.
 */
export async function runCell(input: CellInput): Promise<CellResult> {
  const { factory, profile, ...rest } = input;
  const r = await runEventLoop({
    ...rest,
    sources: [{ name: null, factory, profile }],
    windows: { warmupS: profile.warmupS, measureS: profile.measureS, cooldownS: profile.cooldownS },
    scrapeWithoutFeed: input.arm.name === 'approx-prefix',
  });
  return {
    ...r,
    // A cell's records are RequestRecords (no tenant, refusal or wait), field for field.
    records: r.records.map((x) => ({
      key: x.key,
      conversationId: x.conversationId,
      turnIndex: x.turnIndex,
      cluster: x.cluster,
      pod: x.pod,
      status: x.status,
      startMs: x.startMs,
      firstTokenMs: x.firstTokenMs,
      lastTokenMs: x.lastTokenMs,
      endMs: x.endMs,
      promptTokens: x.promptTokens,
      outputTokens: x.outputTokens,
      cachedTokens: x.cachedTokens,
      ...(x.attempt !== undefined ? { attempt: x.attempt, firstSentMs: x.firstSentMs } : {}),
    })),
  };
}
