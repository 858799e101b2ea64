// Kubernetes EndpointSlices of a Service → the pods the collector follows (terminating ones left out).
import type { V1EndpointSlice } from '@kubernetes/client-node';
import type { Static } from '@sinclair/typebox';
import type { KubernetesSchema } from '../../config/fleet-config.js';
import type { PodSpec } from '../pods.js';

export type KubernetesSection = Static<typeof KubernetesSchema>;

function hostPort(ip: string, port: number): string {
  return ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`;
}

function podId(ep: { targetRef?: { kind?: string; name?: string } }, ip: string, service: string): string {
  if (ep.targetRef?.name && (ep.targetRef.kind ?? 'Pod') === 'Pod') return ep.targetRef.name;
  return `${service}-${ip.replace(/[^A-Za-z0-9]/g, '-')}`;
}

/**
 * EndpointSlices of a Service → the pods to follow. A terminating endpoint is left out. One that is not
 * ready or marked not serving (with the Service's publishNotReadyAddresses the controller reports every
 * endpoint ready, and `serving` carries the probe) is listed with `ready: false`: a readiness probe that
 * times out under load must not cost the pod its index (the collector keeps following it, out of routing).
 * A missing `ready` means ready, per the API. The first address is the pod's IP; ports come from the
 * config, not the slice (the Service need not expose the KV-event ports). Pods listed in several slices
 * (during updates) appear once, ready if any slice says so. On a dual-stack Service the IPv4 address wins,
 * whatever order the slices come in: vLLM's ZMQ publisher binds `tcp://*:port` without IPv6, and a pod
 * whose address flipped family would be restarted and lose its index. Sorted by id.
 */
export function podsFromEndpointSlices(
  slices: readonly V1EndpointSlice[],
  k8s: KubernetesSection,
): PodSpec[] {
  const byId = new Map<string, PodSpec>();
  const family = (s: V1EndpointSlice): number => (s.addressType === 'IPv4' ? 0 : 1);
  const name = (s: V1EndpointSlice): string => s.metadata?.name ?? '';
  const ordered = slices
    .filter((s) => s.addressType === 'IPv4' || s.addressType === 'IPv6')
    .sort((a, b) => family(a) - family(b) || (name(a) < name(b) ? -1 : name(a) > name(b) ? 1 : 0));
  for (const slice of ordered) {
    for (const ep of slice.endpoints ?? []) {
      const c = ep.conditions;
      if (c?.terminating === true) continue;
      const ip = ep.addresses[0];
      if (!ip) continue;
      const id = podId(ep, ip, k8s.service);
      const ready = c?.ready !== false && c?.serving !== false;
      const seen = byId.get(id);
      if (seen) {
        // The first (IPv4) address stays; ready in any slice means ready.
        if (ready) delete seen.ready;
        continue;
      }
      const tcp = (port: number): string => `tcp://${hostPort(ip, port)}`;
      byId.set(id, {
        id,
        model: k8s.model,
        address: hostPort(ip, k8s.http_port),
        kvEvents: tcp(k8s.kv_events_port),
        ...(k8s.kv_events_replay_port ? { kvEventsReplay: tcp(k8s.kv_events_replay_port) } : {}),
        topic: k8s.kv_events_topic ?? '',
        metrics: `http://${hostPort(ip, k8s.http_port)}${k8s.metrics_path}`,
        dataParallelSize: k8s.data_parallel_size,
        ...(ready ? {} : { ready: false }),
      });
    }
  }
  return [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
