import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resetPodPrefixCache } from '../../bench/lib/live/stack.js';
import { MODEL } from '../02-integration/emulator/emulator-fleet.js';
import { keysFor } from '../02-integration/plugin/harness.js';
import {
  postChat,
  promCounter as counter,
  startFullSystem,
  type FullSystem,
} from '../helpers/full-system.js';
import { waitFor } from '../helpers/ports.js';

/**
 * The whole system, nothing faked: emulated vLLM pods (real Qwen3 tokenizer and chat template) publish KV
 * events over ZMQ → the collector writes the index to real Redis → the plugin, in the real plugin server
 * behind the stand-in, reads it and routes the OpenAI SDK's streaming request to the pod that really holds
 * the prompt's prefix — and that pod then reports a prefix-cache hit.
 */

const SYSTEM = Array.from(
  { length: 40 },
  (_, i) =>
    `Clause ${i + 1}: the reviewer must quote the clause number and keep every answer under fifty words.`,
).join(' ');
const messages = (q: string): { role: 'system' | 'user'; content: string }[] => [
  { role: 'system', content: SYSTEM },
  { role: 'user', content: q },
];

// The same path on a standalone Redis and on a 3-shard Redis Cluster (`redis_cluster: true` for the
// collector's index and the plugin, each given one node).
describe.each([
  { redis: 'Redis', redisCluster: false },
  { redis: 'a Redis Cluster', redisCluster: true },
])('e2e: emulator → collector → $redis → plugin (stand-in) → OpenAI SDK', ({ redisCluster }) => {
  let sys: FullSystem;

  beforeAll(async () => {
    sys = await startFullSystem(`kinf-e2e-sys${redisCluster ? '-cl' : ''}`, {}, { redisCluster });
    // First request per router loads the Qwen3 tokenizer and opens Redis: keep it off the measured path.
    await fetch(`${sys.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hello' }], max_tokens: 2 }),
    }).then((r) => r.text());
  }, 120_000);

  afterAll(async () => {
    await sys?.close();
  });

  it('sends the request to the pod that really cached the prefix, which then hits its prefix cache', async () => {
    // Warm pod-2 only (pod-0 would win a tie on pod id, so a hit on pod-2 can only come from the cache).
    const warm = sys.fleet.pods[2]!;
    const r0 = await postChat(warm.base, {
      model: MODEL,
      messages: messages('Which clause covers quoting?'),
      max_tokens: 4,
    });
    expect(r0.status).toBe(200);
    await r0.text();

    // The collector turns pod-2's KV events into index entries for the shared prefix.
    const body = { model: MODEL, messages: messages('Summarise clause 17.'), stream: true };
    const keys = await keysFor(sys.pluginConfig, body);
    const sharedBlocks = Math.floor(keys.length * 0.8);
    await waitFor(
      'pod-2 indexed',
      async () => {
        const res = await sys.index.lookup(MODEL, keys);
        return (res.pods.find((p) => p.state.podId === 'pod-2')?.prefixBlocks.GPU ?? 0) >= sharedBlocks;
      },
      20_000,
      50,
    );

    const hitsBefore = await Promise.all(
      sys.fleet.pods.map((p) => counter(p.base, 'vllm:prefix_cache_hits_total')),
    );
    const doneBefore = await Promise.all(
      sys.fleet.pods.map((p) => counter(p.base, 'vllm:request_success_total')),
    );
    const serviceBefore = sys.service.requests.length;

    const client = new OpenAI({ baseURL: `${sys.gw.url}/v1`, apiKey: 'test', maxRetries: 0 });
    const stream = await client.chat.completions.create({
      ...body,
      max_tokens: 8,
    } as OpenAI.Chat.ChatCompletionCreateParamsStreaming);
    let chunks = 0;
    let finish: string | null = null;
    for await (const c of stream) {
      chunks++;
      finish = c.choices[0]?.finish_reason ?? finish;
    }
    expect(chunks).toBeGreaterThan(1);
    expect(finish).not.toBeNull();

    const doneAfter = await Promise.all(
      sys.fleet.pods.map((p) => counter(p.base, 'vllm:request_success_total')),
    );
    const hitsAfter = await Promise.all(
      sys.fleet.pods.map((p) => counter(p.base, 'vllm:prefix_cache_hits_total')),
    );
    expect(doneAfter.map((n, i) => n - doneBefore[i]!)).toEqual([0, 0, 1]);
    expect(hitsAfter[2]! - hitsBefore[2]!).toBeGreaterThanOrEqual(sharedBlocks * 16);
    expect(sys.service.requests.length).toBe(serviceBefore);
  });

  it('a pod’s prefix-cache reset reaches the index with the pod’s next step, which the bench stacks send', async () => {
    // vLLM publishes AllBlocksCleared with its next step, not at the reset: resetPodPrefixCache pokes the pod.
    const pod = sys.fleet.pods[1]!;
    const body = { model: MODEL, messages: messages('Reset me, then forget me.'), max_tokens: 2 };
    await (await postChat(pod.base, body)).text();
    const keys = await keysFor(sys.pluginConfig, { ...body, stream: true });
    const held = async (): Promise<number> =>
      (await sys.index.lookup(MODEL, keys)).pods.find((p) => p.state.podId === 'pod-1')?.prefixBlocks.GPU ??
      0;
    await waitFor('pod-1 indexed', async () => (await held()) > 0, 20_000, 50);
    const url = new URL(pod.base);
    await resetPodPrefixCache({ host: url.hostname, port: Number(url.port) });
    await waitFor('pod-1 cleared in the index', async () => (await held()) === 0, 20_000, 50);
  });
});
