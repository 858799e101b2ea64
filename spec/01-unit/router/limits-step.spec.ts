import { describe, expect, it } from 'vitest';
import { PluginConfigSchema } from '../../../src/config/plugin-config.js';
import { validateConfig } from '../../../src/config/validate.js';
import { createRouter, defaultResources } from '../../../src/router/index.js';
import { QWEN3_TEMPLATE, QWEN3_TOKENIZER } from '../../helpers/qwen3.js';

const MODEL = 'Qwen/Qwen3-8B';
const NOW = 1_000_000;
const body = JSON.stringify({
  model: MODEL,
  messages: [{ role: 'user', content: 'Hello there.' }],
  max_tokens: 0,
});
const caller = (tenant: string) => ({ consumer: null, consumerGroups: [], headerTenant: tenant });

/** A router on the memory index and limiter, one pod (`waiting` requests queued), prompt tokens per hour limited. */
async function router(limit: number, extra: Record<string, unknown> = {}, waiting = 0) {
  const cfg = validateConfig(
    PluginConfigSchema,
    {
      index: 'memory',
      tokenizer: QWEN3_TOKENIZER,
      chat_template: QWEN3_TEMPLATE,
      ...extra,
      policies: {
        tenant_from: ['header'],
        rate_limits: [{ match: {}, limits: [{ tokens: 'prompt', window: 'hour', limit }] }],
      },
    },
    'test',
  );
  const res = defaultResources(cfg);
  await res.index.upsertPodState(
    { model: MODEL, podId: 'pod-0' },
    {
      address: '10.0.0.1:8000',
      waiting,
      meanQueuedPrefillTokens: 8000,
      lastScrapeAtMs: NOW - 1,
      lastEventAtMs: NOW - 1,
    },
  );
  return createRouter(cfg, res, { clock: () => NOW });
}

describe('router: the limits step beside the lookup', () => {
  it('admits with headers, then refuses over the limit without booking a pod', async () => {
    const first = await (await router(1000)).route(body, caller('a'));
    const r = await router(first.promptTokens * 2);
    const a = await r.route(body, caller('a'));
    expect(a.target?.podId).toBe('pod-0');
    expect(a.limit?.verdict).toMatchObject({
      admitted: true,
      headers: { 'X-AI-RateLimit-Limit-3600-prompt': String(first.promptTokens * 2) },
    });
    await r.route(body, caller('a'));
    const booked = r.stats().reservations;
    const refused = await r.route(body, caller('a'));
    expect(refused.limit?.verdict).toMatchObject({
      admitted: false,
      status: 429,
      code: 'prompt_tokens_per_hour_exceeded',
    });
    expect(refused).toMatchObject({ target: null, reservationId: null, shed: null });
    expect(r.stats().reservations).toBe(booked);
    // Another tenant has its own counters.
    expect((await r.route(body, caller('b'))).limit?.verdict.admitted).toBe(true);
    await r.close();
  });

  it('a request shed by overload admission gives back what the limits counted', async () => {
    const probe = await (await router(1000)).route(body, caller('a'));
    const r = await router(probe.promptTokens, { shed_ttft_slo_ms: 500 }, 50);
    const shed = await r.route(body, caller('a'));
    expect(shed.shed).toMatchObject({ status: 429 });
    await new Promise((res) => setImmediate(res)); // the release is not awaited by route()
    // The whole limit is free again: the shed request used none of it.
    const again = await r.route(body, caller('a'));
    expect(again.limit?.verdict.admitted).toBe(true);
    await r.close();
  });
});
