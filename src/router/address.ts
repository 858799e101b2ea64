// Pod addresses Kong can target: "host:port" parsing and whether a pod is routable at all.
import type { PodState } from '../core/types.js';

/** "host:port" or "[v6]:port" → its parts, or null when it names no port Kong can connect to. */
export function splitAddress(address: string): { host: string; port: number } | null {
  const i = address.lastIndexOf(':');
  if (i <= 0) return null;
  const port = Number(address.slice(i + 1));
  if (!Number.isInteger(port) || port <= 0 || port > 65535) return null;
  const host = address.slice(0, i).replace(/^\[(.*)\]$/, '$1');
  return host ? { host, port } : null;
}

/**
 * A pod Kong can be sent to. One without (no address yet, port 0) is no candidate: routed there, the request
 * would go to the service url with no reason given.
 */
export function routable(state: PodState): boolean {
  return splitAddress(state.address) !== null;
}
