import { describe, expect, it } from 'vitest';
import { runAccess, type PhaseDeps } from '../../../plugins/kinference/access.js';
import { runLog } from '../../../plugins/kinference/log-phase.js';
import { PendingDecisions } from '../../../plugins/kinference/pending.js';
import type { AccessPdk, LogPdk, SharedValue } from '../../../plugins/kinference/pdk.js';
import {
  COST_HEADER,
  quoteCost,
  recordShed,
  type UsageDeps,
} from '../../../plugins/kinference/usage-phase.js';
import {
  createRouter,
  defaultResources,
  emptyOutcome,
  type RouteOutcome,
} from '../../../src/router/index.js';
import type { UsageEvent } from '../../../src/usage/index.js';
import { qwen3RouterConfig } from '../../helpers/qwen3.js';

/**
 * The plugin's usage glue with Kong's side answered in memory (the Kong stand-in of this branch has no
 * kong.response.set_header yet): the quote header in the access phase, the record from the log phase. The
 * writer against a real Redis is spec/02-integration/usage; end to end, spec/03-e2e/usage-records.
 */

const MODEL = 'm';
const body = JSON.stringify({
  model: MODEL,
  messages: [{ role: 'user', content: 'hello there, how are the tides today?' }],
  stream: true,
  max_tokens: 100,
});

function kong(o: { headerFails?: boolean } = {}) {
  const shared = new Map<string, SharedValue>();
  const responseHeaders: [string, string][] = [];
  let target: string | null = null;
  const pdk: AccessPdk & LogPdk = {
    getHeaders: async () => ({
      'content-length': [String(body.length)],
      'content-type': ['application/json'],
    }),
    getRawBody: async () => body,
    setTarget: async (h, p) => void (target = `${h}:${p}`),
    setUpstreamHeaders: async () => undefined,
    setUpstreamBody: async () => undefined,
    clearUpstreamHeader: async () => undefined,
    setResponseHeaders: async (h) => {
      if (o.headerFails) throw new Error('set_headers failed');
      responseHeaders.push(...Object.entries(h));
    },
    ctxSharedSet: async (k, v) => void shared.set(k, v),
    exit: () => undefined,
    serialize: async () =>
      JSON.stringify({
        response: {
          status: 200,
          size: 12_000,
          headers: { 'content-type': 'text/event-stream; charset=utf-8', via: '1.1 kong/3.9.1' },
        },
        latencies: { proxy: 140 },
        upstream_status: '200',
        tries: [{ ip: '10.0.0.1', port: 8000 }],
      }),
    ctxSharedGet: async (k) => shared.get(k),
    warn: async () => undefined,
  };
  return { pdk, responseHeaders, target: () => target };
}

function deps(
  policies: Record<string, unknown>,
): PhaseDeps & { events: UsageEvent[]; outcomes: RouteOutcome[] } {
  const config = qwen3RouterConfig({
    model_pods: { [MODEL]: ['10.0.0.1:8000'] },
    tokenizer: 'tiktoken:o200k_base',
    chat_template: 'chatml',
    policies,
  });
  const router = createRouter(config, defaultResources(config));
  const events: UsageEvent[] = [];
  const outcomes: RouteOutcome[] = [];
  const usage: UsageDeps = {
    policies: config.policies!,
    writer: { record: async (e) => (events.push(e), true) },
  };
  return {
    config,
    router: {
      route: async (b) => {
        const o = await router.route(b);
        outcomes.push(o);
        return o;
      },
      observe: (o, t, u) => router.observe(o, t, u),
    },
    tracer: null,
    pending: new PendingDecisions(),
    now: Date.now,
    usage,
    events,
    outcomes,
  };
}

const PRICES = { '*': { input_per_million: 2, cached_input_per_million: 0.5, output_per_million: 8 } };

describe('usage in the plugin phases', () => {
  it('quotes the predicted cost in x-kinference-cost-estimate: prompt, predicted cached, reserved output', async () => {
    const d = deps({ prices: PRICES, currency: 'EUR' });
    const k = kong();
    await runAccess(k.pdk, d);
    expect(k.target()).toBe('10.0.0.1:8000');
    const o = d.outcomes[0]!;
    expect(o.maxTokens).toBe(100);
    const q = quoteCost(o, d.usage!.policies)!;
    // No cached tokens on a fresh pod: prompt × input + 100 reserved × output.
    expect(q.cost).toBeCloseTo(o.promptTokens * 2e-6 + 100 * 8e-6, 12);
    expect(k.responseHeaders).toEqual([[COST_HEADER, `${Number(q.cost!.toPrecision(6))} EUR`]]);
  });

  it('no header without a price for the model, nor with quote_cost off; a failed header call fails nothing', async () => {
    const none = deps({ prices: { other: PRICES['*'] } });
    const k1 = kong();
    await runAccess(k1.pdk, none);
    expect(k1.responseHeaders).toEqual([]);
    const off = deps({ prices: PRICES, quote_cost: false });
    const k2 = kong();
    await runAccess(k2.pdk, off);
    expect(k2.responseHeaders).toEqual([]);
    const failing = deps({ prices: PRICES });
    const k3 = kong({ headerFails: true });
    await runAccess(k3.pdk, failing);
    expect(k3.target()).toBe('10.0.0.1:8000');
    expect(failing.pending.size).toBe(1);
  });

  it('the log phase records the request: default tenant and class, estimated output, TTFT and cost', async () => {
    const d = deps({ prices: PRICES, default_tenant: 'nobody', default_class: 'batch' });
    const k = kong();
    await runAccess(k.pdk, d);
    await runLog(k.pdk, d);
    expect(d.events).toHaveLength(1);
    const e = d.events[0]!;
    expect(e).toMatchObject({
      tenant: 'nobody',
      serviceClass: 'batch',
      model: MODEL,
      shed: false,
      ttftMs: 140,
    });
    expect(e.promptTokens).toBe(d.outcomes[0]!.promptTokens);
    expect(e.output).toMatchObject({ exact: false, streamed: true });
    // ~12 kB of SSE at ~200 bytes a token.
    expect(e.output!.tokens).toBeGreaterThan(40);
    expect(e.output!.tokens).toBeLessThan(70);
    expect(e.cost.cost).toBeCloseTo(e.promptTokens * 2e-6 + e.output!.tokens * 8e-6, 12);
  });

  it('without a policies section nothing is quoted or recorded', async () => {
    const d = deps({ prices: PRICES });
    const plain: PhaseDeps = { ...d, usage: null };
    const k = kong();
    await runAccess(k.pdk, plain);
    await runLog(k.pdk, plain);
    expect(k.responseHeaders).toEqual([]);
    expect(d.events).toEqual([]);
  });

  it('a shed request (429 before forwarding) is counted as shed with no tokens; one of no known model is not', async () => {
    const d = deps({ prices: PRICES });
    const shed: RouteOutcome = {
      ...emptyOutcome('no_pods_in_index', ''),
      fallbackReason: null,
      model: MODEL,
      promptTokens: 900,
      shed: { retryAfterS: 2, status: 429 },
    };
    recordShed(d.usage!, shed, Date.now());
    recordShed(d.usage!, { ...shed, model: null }, Date.now());
    await new Promise((r) => setImmediate(r));
    expect(d.events).toHaveLength(1);
    expect(d.events[0]).toMatchObject({ tenant: 'default', model: MODEL, shed: true, cost: { cost: 0 } });
  });
});
