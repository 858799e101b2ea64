/** Shared shapes of the benchmark: workloads, profiles, per-request records. Times are milliseconds. */

export const WORKLOAD_NAMES = ['control', 'shared-prefix', 'multiturn'] as const;
export type WorkloadName = (typeof WORKLOAD_NAMES)[number];

export const ARM_NAMES = [
  'random',
  'round-robin',
  'least-connections',
  'latency',
  'consistent-hash',
  'approx-prefix',
  'kinference',
  'kinference-slo',
  'oracle',
] as const;
export type ArmName = (typeof ARM_NAMES)[number];

/** GuideLLM's `settings.max_worker_processes`: the worker processes its `poisson` strategy draws arrivals in. */
export const GUIDELLM_WORKERS = 10;

/** A GuideLLM load profile with its transient phases (seconds, GuideLLM's prefer_duration mode). */
export type Profile =
  | {
      kind: 'poisson';
      rate: number;
      warmupS: number;
      measureS: number;
      cooldownS: number;
      /** 1 (default): a plain Poisson process; N > 1: GuideLLM's schedule with N workers (workload/arrivals.ts). */
      clientWorkers?: number;
    }
  | { kind: 'concurrent'; streams: number; warmupS: number; measureS: number; cooldownS: number };

export function profileLabel(p: Profile): string {
  if (p.kind === 'concurrent') return `concurrent@${p.streams}`;
  const w = p.clientWorkers ?? 1;
  return w > 1 ? `guidellm-poisson@${p.rate}/s×${w}` : `poisson@${p.rate}/s`;
}

export function profileDurationS(p: Profile): number {
  return p.warmupS + p.measureS + p.cooldownS;
}

export type RequestStatus = 'successful' | 'incomplete' | 'errored';

/**
 * One request as the client saw it (GuideLLM's GenerativeRequestStats timings, client-side clock):
 * start just before the request is sent, first/last token iterations, end after the stream closed.
 */
export interface RequestRecord {
  /** Stable across arms of one trial: pairs request k of arm A with request k of arm B. */
  key: string;
  conversationId: string;
  turnIndex: number;
  /** Bootstrap cluster: the prefix group (shared-prefix), the conversation (multiturn), the request (control). */
  cluster: string;
  pod: string;
  status: RequestStatus;
  startMs: number;
  firstTokenMs: number | null;
  lastTokenMs: number | null;
  endMs: number | null;
  promptTokens: number;
  outputTokens: number;
  cachedTokens: number;
}
