import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MODEL } from '../02-integration/emulator/emulator-fleet.js';
import { keysFor } from '../02-integration/plugin/harness.js';
import { promCounter as counter, startFullSystem, type FullSystem } from '../helpers/full-system.js';
import { waitFor } from '../helpers/ports.js';

/**
 * A vLLM server with --data-parallel-size 2 behind one address: each rank has its own KV cache, and vLLM's
 * API server sends a request to the least-loaded rank unless X-data-parallel-rank names one. The plugin
 * chooses a rank by its cache, so it must name it.
 */

const SYSTEM = Array.from(
  { length: 40 },
  (_, i) => `Rule ${i + 1}: answer in the register of a ship's log and cite the rule by its number.`,
).join(' ');
const messages = (q: string): { role: 'system' | 'user'; content: string }[] => [
  { role: 'system', content: SYSTEM },
  { role: 'user', content: q },
];

const postToRank = (base: string, rank: number, body: unknown): Promise<Response> =>
  fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-data-parallel-rank': String(rank) },
    body: JSON.stringify(body),
  });

// A server with ranks 0 and 1, and a hybrid-DP node whose ranks are 2 and 3 (--data-parallel-start-rank 2):
// those publish on the ports + 2 and + 3 and report engine="2"/"3", while X-data-parallel-rank takes 0 or 1.
describe.each([{ start: 0 }, { start: 2 }])(
  'e2e: a data-parallel pod (2 ranks behind one address, first rank $start)',
  ({ start }) => {
    let sys: FullSystem;
    const engine = (r: number): number => start + r;

    beforeAll(async () => {
      sys = await startFullSystem(
        `kinf-e2e-dp${start}`,
        {},
        {
          pods: 1,
          podExtra: { data_parallel_size: 2, ...(start ? { data_parallel_start_rank: start } : {}) },
        },
      );
    }, 120_000);

    afterAll(async () => {
      await sys?.close();
    });

    it('sends the request to the rank that cached the prefix, named in X-data-parallel-rank', async () => {
      const pod = sys.fleet.pods[0]!;
      const warm = await postToRank(pod.base, 1, {
        model: MODEL,
        messages: messages('Which rule covers citations?'),
        max_tokens: 4,
      });
      expect(warm.status).toBe(200);
      await warm.text();

      const body = { model: MODEL, messages: messages('Log the morning watch.'), max_tokens: 4 };
      const keys = await keysFor(sys.pluginConfig, body);
      const sharedBlocks = Math.floor(keys.length * 0.8);
      await waitFor(
        'rank 1 indexed',
        async () => {
          const res = await sys.index.lookup(MODEL, keys);
          return (res.pods.find((p) => p.state.podId === 'pod-0@dp1')?.prefixBlocks.GPU ?? 0) >= sharedBlocks;
        },
        20_000,
        50,
      );

      // Rank 1 busy with a long decode: left to itself, vLLM's balancer (waiting × 4 + running) picks rank 0.
      const busy = postToRank(pod.base, 1, {
        model: MODEL,
        messages: [{ role: 'user', content: 'Count slowly.' }],
        max_tokens: 1500,
        ignore_eos: true,
      });
      await waitFor(
        'rank 1 running',
        async () => (await counter(pod.base, 'vllm:num_requests_running', engine(1))) >= 1,
      );

      const hitsBefore = [0, 1].map((r) => counter(pod.base, 'vllm:prefix_cache_hits_total', engine(r)));
      const doneBefore = await counter(pod.base, 'vllm:request_success_total', engine(0));
      const hits0 = await hitsBefore[0]!;
      const hits1 = await hitsBefore[1]!;
      const res = await fetch(`${sys.gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(res.status).toBe(200);
      await res.text();

      expect(
        (await counter(pod.base, 'vllm:prefix_cache_hits_total', engine(1))) - hits1,
      ).toBeGreaterThanOrEqual(sharedBlocks * 16);
      expect(await counter(pod.base, 'vllm:prefix_cache_hits_total', engine(0))).toBe(hits0);
      expect(await counter(pod.base, 'vllm:request_success_total', engine(0))).toBe(doneBefore);
      (await busy).body?.cancel();
    });
  },
);
