import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MODEL } from '../02-integration/emulator/emulator-fleet.js';
import { startFullSystem, type FullSystem } from '../helpers/full-system.js';
import { waitFor } from '../helpers/ports.js';

/**
 * Token limits end to end: emulated pods → collector → Redis → the plugin in the real plugin server behind
 * the stand-in, tenants named by a header. Each tenant may use 1000 tokens (prompt + reserved output) per
 * hour: a request reserving 600 output tokens fits, and the tenant is refused once what is left (after each
 * answer settles to its own tokens) cannot hold another.
 */

let sys: FullSystem;

const chat = (q: string): string =>
  JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: q }], max_tokens: 600, stream: true });

const post = (tenant: string, body: string): Promise<Response> =>
  fetch(`${sys.gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-tenant-id': tenant },
    body,
  });

beforeAll(async () => {
  sys = await startFullSystem('kinf-e2e-limits', {
    // The behaviour is the point, not the budget: a loaded machine must not fail the limits open.
    redis_timeout_ms: 2000,
    policies: {
      tenant_from: ['header'],
      rate_limits: [{ match: {}, limits: [{ tokens: 'total', window: 'hour', limit: 1000 }] }],
    },
  });
}, 120_000);

afterAll(async () => {
  await sys?.close();
});

describe('e2e: token rate limits through the stand-in and the real plugin server', () => {
  it('a tenant under its limit gets the X-AI-RateLimit headers; over it, 429 with Retry-After and an OpenAI error', async () => {
    // Until the tokenizer has loaded (in the background), requests are routed on load, uncounted: warm up
    // with a tenant of its own until the limits answer.
    let warm = 0;
    await waitFor(
      'the limits count requests',
      async () => {
        const r = await post(`warm-${++warm}`, chat('warm up'));
        await r.text();
        return r.headers.get('x-ai-ratelimit-limit-3600-total') === '1000';
      },
      60_000,
    );
    const first = await post('team-a', chat('what is a kv cache?'));
    const text = await first.text();
    expect(first.status).toBe(200);
    expect(text).toContain('data: [DONE]');
    expect(first.headers.get('x-ai-ratelimit-limit-3600-total')).toBe('1000');
    // 1000 − the prompt's exact tokens − the 600 reserved for the answer.
    const remaining = Number(first.headers.get('x-ai-ratelimit-remaining-3600-total'));
    expect(remaining).toBeGreaterThan(0);
    expect(remaining).toBeLessThan(400);
    expect(Number(first.headers.get('x-ai-ratelimit-reset-3600-total'))).toBeGreaterThan(0);

    // Each answer settles to its own tokens when it ends (the usage record's estimate from the bytes sent), so how
    // many more requests fit depends on the answers' lengths: send until the tenant is refused.
    let second = await post('team-a', chat('and a prefix cache?'));
    for (let i = 0; second.status === 200 && i < 20; i++) {
      await second.text();
      second = await post('team-a', chat(`and a prefix cache, take ${i}?`));
    }
    expect(second.status).toBe(429);
    const retry = Number(second.headers.get('retry-after'));
    expect(retry).toBeGreaterThanOrEqual(1);
    expect(retry).toBeLessThanOrEqual(3600);
    expect(second.headers.get('x-ai-ratelimit-retry-after')).toBe(String(retry));
    // What is left is too little for a prompt plus its 600 reserved output tokens.
    const left = Number(second.headers.get('x-ai-ratelimit-remaining-3600-total'));
    expect(left).toBeGreaterThanOrEqual(0);
    expect(left).toBeLessThan(700);
    expect(await second.json()).toMatchObject({
      error: { type: 'rate_limit_error', code: 'total_tokens_per_hour_exceeded' },
    });

    // Another tenant has its own counters.
    const other = await post('team-b', chat('what is a kv cache?'));
    await other.text();
    expect(other.status).toBe(200);
    expect(other.headers.get('x-ai-ratelimit-limit-3600-total')).toBe('1000');
  }, 60_000);
});
