import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { streamChat } from '../../bench/lib/live/http-client.js';
import { startLiveStack, type LiveStack } from '../../bench/lib/live/stack.js';
import { loadModelSetup, type ModelSetup } from '../../bench/lib/setup.js';

const cli = fileURLToPath(new URL('../../bin/kinference.js', import.meta.url));

/**
 * A token limit through several live Kong nodes: emulated pods, collector, Redis, three stand-in nodes on one
 * declarative config, each with its own plugin server, a key-auth consumer with a prompt-token limit. A burst
 * of requests dealt across the nodes is admitted up to the limit and not one prompt further: every node asks
 * the one Redis counter before forwarding (Kong's ai-rate-limiting-advanced counts after the answer).
 */

const NODES = 3;
const LIMIT = 2000;
let stack: LiveStack;
let m: ModelSetup;

beforeAll(async () => {
  m = await loadModelSetup();
  stack = await startLiveStack({
    pods: 1,
    profile: 'l40s-27b-fp8',
    kvCapacityTokens: 94_208,
    timeScale: 10,
    seed: 42,
    scrapeIntervalMs: 1000,
    model: m,
    cli,
    gateways: NODES,
    consumers: () => [{ username: 'free', keyauth_credentials: [{ key: 'free-key' }] }],
    routePlugins: [{ name: 'key-auth', config: { hide_credentials: true } }],
    pluginExtra: {
      // The behaviour is the point: a loaded machine must not fail the limit open (on_redis_error: allow).
      redis_timeout_ms: 2000,
      decision_workers: 0,
      policies: {
        tenant_from: ['consumer'],
        rate_limits: [
          { match: { consumer: 'free' }, limits: [{ tokens: 'prompt', window: 'hour', limit: LIMIT }] },
        ],
      },
    },
  });
}, 240_000); // the stack waits for every node's tokenizer (three plugin servers on a loaded machine)

afterAll(async () => stack?.stop());

describe('e2e: a prompt-token limit across three live Kong nodes on one Redis', () => {
  it('admits a burst dealt across the nodes up to the limit, never a prompt past it', async () => {
    const body = JSON.stringify({
      model: m.model,
      messages: [{ role: 'user', content: 'why do shared prompt prefixes make routing matter? '.repeat(20) }],
      max_tokens: 4,
      stream: true,
      stream_options: { include_usage: true },
    });
    const send = (node: number) => {
      let remaining: number | null = null;
      let resetS: number | null = null;
      const gw = stack.gateways[node % NODES]!;
      return streamChat(gw.host, gw.port, body, undefined, {
        headers: { apikey: 'free-key' },
        onResponse: (_status, h) => {
          remaining = Number(h['x-ai-ratelimit-remaining-3600-prompt'] ?? NaN);
          resetS = Number(h['x-ai-ratelimit-reset-3600-prompt'] ?? NaN);
        },
      }).then((t) => ({ t, remaining: remaining!, resetS: resetS!, at: Date.now() }));
    };
    // The size of one prompt, as the limiter counted it.
    const first = await send(0);
    expect(first.t.status).toBe(200);
    const prompt = LIMIT - first.remaining;
    expect(prompt).toBeGreaterThan(100);
    expect(first.t.promptTokens).toBe(prompt);
    const fit = Math.floor(LIMIT / prompt);
    expect(fit).toBeGreaterThanOrEqual(3);

    const burst = await Promise.all(Array.from({ length: 4 * NODES }, (_, i) => send(i)));
    const admitted = [first, ...burst].filter((x) => x.t.status === 200);
    const refused = burst.filter((x) => x.t.status === 429);
    expect(admitted.length + refused.length).toBe(burst.length + 1);
    for (const x of refused) expect(x.t.error).toContain('prompt_tokens_per_hour_exceeded');
    // Each answer's window (its end: when + reset): a burst that crosses the hour is two windows.
    const windows = new Set(admitted.map((x) => Math.round((x.at + x.resetS * 1000) / 3_600_000)));
    if (windows.size === 1) {
      expect(admitted).toHaveLength(fit);
      // The last admission saw the counter every node added to: the limit minus all of them.
      expect(Math.min(...admitted.map((x) => x.remaining))).toBe(LIMIT - fit * prompt);
    } else expect(admitted.length).toBeLessThanOrEqual(fit * windows.size);
    expect(refused.length).toBeGreaterThan(0);
    for (const x of admitted) expect(x.t.promptTokens).toBe(prompt);
  }, 60_000);
});
