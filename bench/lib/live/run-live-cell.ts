// Runs one benchmark cell against real processes (random or kinference), driven as the DES client.
import { Rng } from '../rng.js';
import type { ModelSetup } from '../setup.js';
import { clientRandomRouter, kubeProxyArm } from '../arms/kube-proxy.js';
import { randomArm as randomPerRequest } from '../arms/simple.js';
import type { Profile, RandomRouting, RequestRecord } from '../types.js';
import type { WorkloadFactory } from '../workload/workloads.js';
import { driveLoad, type LoadRunResult } from './drive-load.js';
import { streamChat } from './http-client.js';
import { podsServed, type LiveStack } from './stack.js';

export type LiveArm = 'random' | 'kinference' | 'kinference-slo';

export type LiveCellResult = LoadRunResult;

/** One live cell: the stack it runs on, the workload and load, and the seed and trial that fix its prompts. */
export interface LiveCellInput {
  stack: LiveStack;
  factory: WorkloadFactory;
  profile: Profile;
  timeScale: number;
  model: ModelSetup;
  seed: number;
  trial: number;
}

/**
 * One cell against real processes, driven as the DES client runs (drive-load.ts). random = the
 * client sends straight to the pod the DES's random arm would pick (kube-proxy per connection or per
 * request, same seeded stream); kinference = through the Kong stand-in and the plugin;
 * kinference-slo = the stand-in's route whose plugin has admission control.
 */
export async function runLiveCell(
  o: LiveCellInput & { arm: LiveArm; randomRouting?: RandomRouting },
): Promise<LiveCellResult> {
  // The same stream as the DES random arm (des/cell-setup.ts), so both modes make the same picks in order.
  const pick = Rng.derive(o.seed, o.trial, 'arm', 'random');
  const randomArm = clientRandomRouter(
    o.randomRouting === 'per-connection' ? kubeProxyArm(pick) : randomPerRequest(pick),
    o.stack.pods.map((p) => p.id),
  );
  /** Gateway requests by Kong request id: their pod is read from the gateway's file-log afterwards. */
  const viaGatewayIds = new Map<string, RequestRecord>();
  const routes = new Map<RequestRecord, NonNullable<ReturnType<typeof randomArm.choose>>>();
  const viaGateway = o.arm !== 'random';
  const path = o.arm === 'kinference-slo' ? (o.stack.sloPath ?? undefined) : undefined;
  if (o.arm === 'kinference-slo' && !path)
    throw new Error('kinference-slo needs a stack started with admission');

  const result = await driveLoad({
    profile: o.profile,
    factory: o.factory,
    model: o.model.model,
    seed: o.seed,
    trial: o.trial,
    timeScale: o.timeScale,
    send: async ({ worker, rec, body, virt }) => {
      // random: the same choice as the DES arm (per request, or kube-proxy per keep-alive connection).
      const route = viaGateway ? null : randomArm.choose(worker, virt(performance.now()));
      const target = route
        ? o.stack.pods.find((p) => p.id === route.podId)!
        : { id: 'gateway', ...o.stack.gateway };
      rec.pod = target.id;
      if (route) routes.set(rec, route);
      const t = await streamChat(target.host, target.port, body, path);
      if (viaGateway && t.requestId !== null && t.status !== 429) viaGatewayIds.set(t.requestId, rec);
      return t;
    },
    onComplete: ({ worker, rec }) => {
      const route = routes.get(rec);
      if (route) randomArm.release(route, worker, rec.endMs!);
    },
  });
  if (viaGatewayIds.size > 0) {
    const served = await podsServed(o.stack, [...viaGatewayIds.keys()]);
    for (const [id, rec] of viaGatewayIds) rec.pod = served.get(id) ?? rec.pod;
  }
  return result;
}
