// The pods the collector follows and their event streams, one per DP rank (vLLM's port offsets).
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
  /** vLLM --data-parallel-size (the server's own ranks): one event stream (and index entry) per rank. */
  dataParallelSize: number;
  /** The global DP rank of the server's first engine (--data-parallel-start-rank); absent: 0. */
  dataParallelStartRank?: number;
  /**
   * false: listed but failing its readiness probe (Kubernetes). A pod already followed stays followed,
   * out of routing, with its index kept; one not yet followed is not started. Absent: ready.
   */
  ready?: boolean;
}

/** One event stream: a pod, or one DP rank of it. */
export interface StreamSpec {
  /**
   * `<id>` when data_parallel_size is 1, else `<id>@dp<r>` with r the rank's index on this server, what
   * X-data-parallel-rank takes (same address, one index entry per rank).
   */
  podId: PodId;
  basePodId: PodId;
  model: string;
  address: string;
  /**
   * The global DP rank: its KV-event port offset, EventBatch.data_parallel_rank and metrics `engine` label.
   * null for a server with one engine at rank 0.
   */
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

/**
 * One stream per rank of the server. vLLM numbers a server's engines by global rank (start + r): each
 * publishes on the ports + that rank and reports it as its metrics `engine`, while X-data-parallel-rank
 * takes the index r among the server's own engines (`local_engines_only`), which the pod id carries.
 */
export function streamsOf(p: PodSpec): StreamSpec[] {
  const n = Math.max(1, p.dataParallelSize);
  const start = p.dataParallelStartRank ?? 0;
  return Array.from({ length: n }, (_, r) => ({
    podId: n === 1 ? p.id : dataParallelPodId(p.id, r),
    basePodId: p.id,
    model: p.model,
    address: p.address,
    rank: n === 1 && start === 0 ? null : start + r,
    ...(p.kvEvents ? { kvEvents: offsetEndpoint(p.kvEvents, start + r) } : {}),
    ...(p.kvEventsReplay ? { kvEventsReplay: offsetEndpoint(p.kvEventsReplay, start + r) } : {}),
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
    a.dataParallelSize === b.dataParallelSize &&
    (a.dataParallelStartRank ?? 0) === (b.dataParallelStartRank ?? 0)
  );
}
