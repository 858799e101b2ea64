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

/** kube-proxy picks a pod per TCP connection; a keep-alive client reuses connections (arms/kube-proxy.ts). */
export type RandomRouting = 'per-connection' | 'per-request';

/** GuideLLM's `settings.max_worker_processes`: the client processes a run is spread over. */
export const GUIDELLM_WORKERS = 10;

/**
 * Open-loop arrival times: `poisson`, independent exponential gaps (the benchmark's seeded stream); or
 * `guidellm`, GuideLLM's `poisson` strategy as it runs, where every worker draws the same gaps
 * (workload/arrivals.ts).
 */
export type ArrivalProcess = 'poisson' | 'guidellm';

/** How the client runs, as GuideLLM does: worker processes, each with its conversations and connection pool. */
export interface ClientShape {
  /** Worker processes (default GUIDELLM_WORKERS): open-loop slots are dealt to them in turn, streams spread over them. */
  clientWorkers?: number;
  /**
   * Retries of a request the gateway answered 429, each sent after the answer's Retry-After (default 0:
   * GuideLLM's client does not retry; the turn fails and its conversation ends).
   */
  retry429?: number;
}

/** A GuideLLM load profile with its transient phases (seconds, GuideLLM's prefer_duration mode). */
export type Profile =
  | ({
      kind: 'poisson';
      rate: number;
      warmupS: number;
      measureS: number;
      cooldownS: number;
      /** Default `poisson`. */
      arrivals?: ArrivalProcess;
    } & ClientShape)
  | ({
      kind: 'concurrent';
      streams: number;
      warmupS: number;
      measureS: number;
      cooldownS: number;
    } & ClientShape);

/** The client worker that sends stream `stream` (GuideLLM runs min(streams, workers) processes). */
export function workerOfStream(p: Profile & { kind: 'concurrent' }, stream: number): number {
  return stream % Math.min(p.streams, p.clientWorkers ?? GUIDELLM_WORKERS);
}

export function profileLabel(p: Profile): string {
  if (p.kind === 'concurrent') return `concurrent@${p.streams}`;
  return p.arrivals === 'guidellm' ? `guidellm-poisson@${p.rate}/s` : `poisson@${p.rate}/s`;
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
  /** Retries before this send (absent: 0, the first). */
  attempt?: number;
  /** When the first attempt of this request was sent (absent: startMs). */
  firstSentMs?: number;
}
