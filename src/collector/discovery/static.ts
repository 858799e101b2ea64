// Pod discovery from the fleet YAML's static `pods:` list.
import type { PodConfig } from '../../config/fleet-config.js';
import type { PodSpec } from '../pods.js';
import type { Discovery } from './discovery.js';

export function podSpecFromConfig(p: PodConfig): PodSpec {
  return {
    id: p.id,
    model: p.model,
    address: p.address,
    ...(p.kv_events ? { kvEvents: p.kv_events } : {}),
    ...(p.kv_events_replay ? { kvEventsReplay: p.kv_events_replay } : {}),
    topic: p.kv_events_topic ?? '',
    ...(p.metrics ? { metrics: p.metrics } : {}),
    dataParallelSize: p.data_parallel_size ?? 1,
    ...(p.data_parallel_start_rank ? { dataParallelStartRank: p.data_parallel_start_rank } : {}),
  };
}

/** The `pods:` list of the fleet YAML, as is. */
export class StaticDiscovery implements Discovery {
  constructor(readonly pods: readonly PodConfig[]) {}

  async start(onChange: (pods: PodSpec[]) => void): Promise<void> {
    onChange(this.pods.map(podSpecFromConfig));
  }

  async stop(): Promise<void> {}
}
