import { describe, expect, it } from 'vitest';
import type { Collector } from '../../src/collector/collector.js';
import type { BlockKey } from '../../src/core/types.js';
import { MODEL } from '../02-integration/emulator/emulator-fleet.js';
import { keysFor } from '../02-integration/plugin/harness.js';
import { startCollector } from '../helpers/collector/collector-harness.js';
import { postChat, promCounter, startFullSystem, type FullSystem } from '../helpers/full-system.js';
import { waitFor } from '../helpers/ports.js';

/**
 * kv_reuse_reports_ms end to end: a collector restart rebuilds a pod's index from a replay buffer that no
 * longer holds the prompt's prefix, so the index loses blocks the pod still caches (and vLLM never stores a
 * cached block again while it is hit). With the setting on, the plugin's next request to that pod carries
 * vllm_xargs.kv_cache_report_mode=full, the emulated vLLM re-announces the blocks it reused, and the index
 * has them again; with it off, it does not.
 */

const SYSTEM = Array.from(
  { length: 40 },
  (_, i) => `Rule ${i + 1}: cite the rule number, answer in one sentence, and never guess a date.`,
).join(' ');
const messages = (q: string): { role: 'system' | 'user'; content: string }[] => [
  { role: 'system', content: SYSTEM },
  { role: 'user', content: q },
];

async function prefixOn(sys: FullSystem, keys: readonly BlockKey[]): Promise<number> {
  const res = await sys.index.lookup(MODEL, keys);
  return res.pods.find((p) => p.state.podId === 'pod-0')?.prefixBlocks.GPU ?? 0;
}

async function afterCollectorRestart(reportsMs: number): Promise<{ regained: number; shared: number }> {
  // One pod, so the router's choice is that pod; a replay buffer of one batch, so a restarted collector
  // cannot rebuild what the pod cached before.
  const sys = await startFullSystem(
    `kinf-e2e-reuse-${reportsMs}`,
    { kv_reuse_reports_ms: reportsMs },
    { pods: 1, emulator: { kv_events_buffer_steps: 1 } },
  );
  let collector: Collector | null = null;
  try {
    const pod = sys.fleet.pods[0]!;
    const direct = async (msgs: unknown): Promise<void> => {
      const r = await postChat(pod.base, { model: MODEL, messages: msgs, max_tokens: 4 });
      expect(r.status).toBe(200);
      await r.text();
    };
    await direct(messages('Which rule covers dates?'));
    // Another prompt after it: the pod's last KV event batch, all a one-batch buffer keeps.
    await direct([{ role: 'user', content: 'An unrelated question about tides and the moon. '.repeat(20) }]);
    const body = { model: MODEL, messages: messages('Summarise rule 17.'), stream: true, max_tokens: 4 };
    const keys = await keysFor(sys.pluginConfig, body);
    const shared = Math.floor(keys.length * 0.8);
    await waitFor('prefix indexed', async () => (await prefixOn(sys, keys)) >= shared, 20_000, 50);

    await sys.collector.stop();
    // As after a crash: the new collector does not go on from the handoff the stopped one left.
    collector = startCollector(sys.index, sys.fleet.config.pods ?? [], { handoff: false });
    await collector.start();
    await waitFor(
      'pod rebuilt from its one-batch buffer',
      async () => {
        const s = (await sys.index.listPods(MODEL)).find((p) => p.podId === 'pod-0');
        return (
          s !== undefined &&
          s.partialSinceMs > 0 &&
          !s.resyncing &&
          collector!.worker('pod-0')!.lastSeq !== null
        );
      },
      20_000,
      50,
    );
    expect(await prefixOn(sys, keys)).toBeLessThan(shared);

    const hits = await promCounter(pod.base, 'vllm:prefix_cache_hits_total');
    const res = await postChat(sys.gw.url, body);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('data: [DONE]');
    // The pod served it from its prefix cache either way.
    expect((await promCounter(pod.base, 'vllm:prefix_cache_hits_total')) - hits).toBeGreaterThanOrEqual(
      shared * 16,
    );
    // Every KV event the pod has published (new blocks, and a re-announcement when asked for) is in the index.
    const state = (await (await fetch(`${pod.base}/emulator/state`)).json()) as {
      ranks: { next_kv_event_seq: number }[];
    };
    const last = state.ranks[0]!.next_kv_event_seq - 1;
    const w = collector.worker('pod-0')!;
    await waitFor('pod events applied', () => w.lastSeq === last && w.queue.queuedBatches === 0, 20_000, 50);
    return { regained: await prefixOn(sys, keys), shared };
  } finally {
    await collector?.stop();
    await sys.close();
  }
}

describe('e2e: reused-block reports win back an index rebuilt without its history', () => {
  it('on (the default window): the next request to the pod puts its cached prefix back in the index', async () => {
    const { regained, shared } = await afterCollectorRestart(600_000);
    expect(regained).toBeGreaterThanOrEqual(shared);
  }, 120_000);

  it('off: the prefix stays missing although the pod holds it', async () => {
    const { regained, shared } = await afterCollectorRestart(0);
    expect(regained).toBeLessThan(shared);
  }, 120_000);
});
