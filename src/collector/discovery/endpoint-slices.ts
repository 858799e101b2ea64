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
 * EndpointSlices of a Service → the pods to follow. An endpoint counts when it is ready (a missing
 * `ready` means ready, per the API), not terminating and not marked not serving (with the Service's
 * publishNotReadyAddresses the controller reports every endpoint ready). Its first address is the pod's IP;
 * ports come from the config, not the slice (the Service need not expose the KV-event ports). Pods listed in
 * several slices (during updates) appear once. Sorted by id.
 */
export function podsFromEndpointSlices(
  slices: readonly V1EndpointSlice[],
  k8s: KubernetesSection,
): PodSpec[] {
  const byId = new Map<string, PodSpec>();
  for (const slice of slices) {
    if (slice.addressType !== 'IPv4' && slice.addressType !== 'IPv6') continue;
    for (const ep of slice.endpoints ?? []) {
      // `ready` is forced true under publishNotReadyAddresses: a terminating or not-serving pod says so here.
      const c = ep.conditions;
      if (c?.ready === false || c?.terminating === true || c?.serving === false) continue;
      const ip = ep.addresses[0];
      if (!ip) continue;
      const id = podId(ep, ip, k8s.service);
      if (byId.has(id)) continue;
      const tcp = (port: number): string => `tcp://${hostPort(ip, port)}`;
      byId.set(id, {
        id,
        model: k8s.model,
        address: hostPort(ip, k8s.http_port),
        kvEvents: tcp(k8s.kv_events_port),
        ...(k8s.kv_events_replay_port ? { kvEventsReplay: tcp(k8s.kv_events_replay_port) } : {}),
        topic: k8s.kv_events_topic ?? '',
        metrics: `http://${hostPort(ip, k8s.http_port)}${k8s.metrics_path}`,
        dataParallelSize: 1,
      });
    }
  }
  return [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
