import { dataParallelPodId, type PodId } from '../core/types.js';

/** A pod to follow, from the static list or from Kubernetes. */
export interface PodSpec {
  id: PodId;
  model: string;
  /** host:port the gateway sends requests to. */
  address: string;
  kvEvents?: string;
  kvEventsReplay?: string;
  topic: string;
  metrics?: string;
  /** vLLM --data-parallel-size: one event stream (and index entry) per rank. */
  dataParallelSize: number;
  /**
   * false: listed but failing its readiness probe (Kubernetes). A pod already followed stays followed,
   * out of routing, with its index kept; one not yet followed is not started. Absent: ready.
   */
  ready?: boolean;
}

/** One event stream: a pod, or one DP rank of it. */
export interface StreamSpec {
  /** `<id>` when data_parallel_size is 1, else `<id>@dp<rank>` (same address, one index entry per rank). */
  podId: PodId;
  basePodId: PodId;
  model: string;
  address: string;
  /** null when the pod has a single rank. */
  rank: number | null;
  kvEvents?: string;
  kvEventsReplay?: string;
  topic: string;
}

/**
 * vLLM's offset_endpoint_port: rank r of a data-parallel deployment publishes on port + r (tcp), or on
 * `<endpoint>_dp<r>` (inproc, ipc); rank 0 keeps the configured endpoint. Replay endpoints follow suit.
 */
export function offsetEndpoint(endpoint: string, rank: number): string {
  if (rank === 0) return endpoint;
  if (endpoint.startsWith('tcp://')) {
    const i = endpoint.lastIndexOf(':');
    const port = Number(endpoint.slice(i + 1));
    if (i > 'tcp://'.length && Number.isInteger(port)) return `${endpoint.slice(0, i)}:${port + rank}`;
    return endpoint;
  }
  return `${endpoint}_dp${rank}`;
}

export function streamsOf(p: PodSpec): StreamSpec[] {
  const n = Math.max(1, p.dataParallelSize);
  return Array.from({ length: n }, (_, r) => ({
    podId: n === 1 ? p.id : dataParallelPodId(p.id, r),
    basePodId: p.id,
    model: p.model,
    address: p.address,
    rank: n === 1 ? null : r,
    ...(p.kvEvents ? { kvEvents: offsetEndpoint(p.kvEvents, r) } : {}),
    ...(p.kvEventsReplay ? { kvEventsReplay: offsetEndpoint(p.kvEventsReplay, r) } : {}),
    topic: p.topic,
  }));
}

export function samePodSpec(a: PodSpec, b: PodSpec): boolean {
  return (
    a.id === b.id &&
    a.model === b.model &&
    a.address === b.address &&
    a.kvEvents === b.kvEvents &&
    a.kvEventsReplay === b.kvEventsReplay &&
    a.topic === b.topic &&
    a.metrics === b.metrics &&
    a.dataParallelSize === b.dataParallelSize
  );
}
