import { describe, expect, it } from 'vitest';
import type { Prediction } from '../../../src/core/predictor.js';
import {
  MAX_MODELS,
  OTHER_MODEL,
  PLUGIN_SERIES,
  PluginMetricsRecorder,
  samplesOf,
  type PluginSample,
  type SeriesKey,
} from '../../../src/plugin-metrics/index.js';
import { emptyOutcome, type RouteOutcome } from '../../../src/router/index.js';
import type { Tenant } from '../../../src/policies/index.js';

/**
 * The recorder's label rules and the reader's histogram arithmetic, in memory (the Redis flush is
 * spec/02-integration/plugin-metrics; the plugin end to end is spec/03-e2e/plugin-metrics).
 */

const chosen = (predictedTtftMs: number, cachedTokens: number, cpuTokens = 0): Prediction =>
  ({ podId: 'p', predictedTtftMs, cachedTokens, cpuTokens }) as unknown as Prediction;

function routed(model: string, o: Partial<RouteOutcome> = {}): RouteOutcome {
  const c = chosen(120, 512, 64);
  return {
    ...emptyOutcome('body_empty', ''),
    fallbackReason: null,
    fallbackDetail: null,
    model,
    promptTokens: 1000,
    target: { host: '10.0.0.1', port: 8000, podId: 'p' },
    decision: { candidates: [c], chosen: c, fallbackReason: null },
    timings: { parseMs: 0, templateMs: 0, tokenizeMs: 0, keysMs: 0, lookupMs: 0, predictMs: 0, totalMs: 1.5 },
    ...o,
  };
}

const tenant = (cls: string): Tenant => ({ name: 't', serviceClass: { name: cls } }) as unknown as Tenant;

/** The samples of a drained recorder, as the collector would export them (one flush's worth). */
function exported(r: PluginMetricsRecorder): Map<SeriesKey, PluginSample[]> {
  return samplesOf(Object.fromEntries([...r.drain()].map(([k, v]) => [k, String(v)])));
}

const value = (
  s: Map<SeriesKey, PluginSample[]>,
  key: SeriesKey,
  labels: Record<string, string>,
  name?: string,
) =>
  s
    .get(key)
    ?.find(
      (x) =>
        (name === undefined || x.name === name) &&
        Object.entries(labels).every(([k, v]) => x.labels[k] === v),
    )?.value;

describe('PluginMetricsRecorder', () => {
  it('counts decisions by outcome and reason, sheds by cause, prompt and predicted cached tokens', () => {
    const r = new PluginMetricsRecorder();
    r.decision(routed('m'));
    r.decision(routed('m', { tenant: tenant('chat') }));
    r.decision(routed('m', { fallbackReason: 'index_timeout' }));
    r.decision(routed('m', { target: null, shed: { status: 429, retryAfterS: 1 } }));
    r.decision(
      routed('m', { target: null, shed: { status: 429, retryAfterS: 1, byClass: { waitedMs: 5 } } }),
    );
    r.decision(emptyOutcome('body_not_json', 'x'));
    const s = exported(r);
    const d = (labels: Record<string, string>) => value(s, 'decisions', labels);
    expect(d({ model: 'm', class: '(none)', outcome: 'routed', reason: 'none' })).toBe(1);
    expect(d({ model: 'm', class: 'chat', outcome: 'routed', reason: 'none' })).toBe(1);
    expect(d({ model: 'm', outcome: 'load_only', reason: 'index_timeout' })).toBe(1);
    expect(d({ model: 'm', outcome: 'shed' })).toBe(2);
    expect(d({ model: '(none)', outcome: 'kong_default', reason: 'body_not_json' })).toBe(1);
    expect(value(s, 'shed', { cause: 'ttft_slo' })).toBe(1);
    expect(value(s, 'shed', { cause: 'class_overload' })).toBe(1);
    // Three forwarded requests: 1000 prompt tokens each, 576 of them predicted cached (GPU + CPU tier).
    expect(value(s, 'prompt', { model: 'm', class: '(none)' })).toBe(2000);
    expect(value(s, 'cached', { model: 'm', class: '(none)' })).toBe(1152);
    expect(value(s, 'prompt', { model: 'm', class: 'chat' })).toBe(1000);
    // Route time: 1.5 ms is in the 2 ms bucket, cumulative up to +Inf; sum in seconds.
    const route = { outcome: 'routed' };
    expect(value(s, 'route', { ...route, le: '0.001' }, 'kinference_plugin_route_seconds_bucket')).toBe(0);
    expect(value(s, 'route', { ...route, le: '0.002' }, 'kinference_plugin_route_seconds_bucket')).toBe(2);
    expect(value(s, 'route', { ...route, le: '+Inf' }, 'kinference_plugin_route_seconds_bucket')).toBe(2);
    expect(value(s, 'route', route, 'kinference_plugin_route_seconds_sum')).toBeCloseTo(0.003, 9);
    expect(value(s, 'route', route, 'kinference_plugin_route_seconds_count')).toBe(2);
    // Every bucket bound is exported, so histogram_quantile has a whole histogram.
    const buckets = s
      .get('route')!
      .filter((x) => x.name.endsWith('_bucket') && x.labels.outcome === 'routed');
    expect(buckets.map((b) => b.labels.le)).toEqual([...PLUGIN_SERIES.route.buckets.map(String), '+Inf']);
    expect(r.size).toBe(0);
  });

  it('a token-limit refusal is outcome limited, cause token_limit, and counts no tokens', () => {
    const r = new PluginMetricsRecorder();
    const limit = { verdict: { admitted: false } } as unknown as RouteOutcome['limit'];
    r.decision(routed('m', { target: null, limit }));
    const s = exported(r);
    expect(value(s, 'decisions', { outcome: 'limited' })).toBe(1);
    expect(value(s, 'shed', { cause: 'token_limit' })).toBe(1);
    expect(s.get('prompt')).toBeUndefined();
  });

  it('predicted and measured TTFT of the same request, and their ratio; none for a load-only route', () => {
    const r = new PluginMetricsRecorder();
    r.ttft(routed('m'), 240); // predicted 120 ms, measured 240 ms
    r.ttft(routed('m', { fallbackReason: 'stale_index' }), 50);
    const s = exported(r);
    const b = 'kinference_plugin_ttft_seconds_bucket';
    expect(value(s, 'ttft', { kind: 'predicted', le: '0.1' }, b)).toBe(0);
    expect(value(s, 'ttft', { kind: 'predicted', le: '0.25' }, b)).toBe(1);
    expect(value(s, 'ttft', { kind: 'measured', le: '0.1' }, b)).toBe(0);
    expect(value(s, 'ttft', { kind: 'measured', le: '0.25' }, b)).toBe(1);
    expect(value(s, 'ttft', { kind: 'measured' }, 'kinference_plugin_ttft_seconds_count')).toBe(1);
    expect(value(s, 'ratio', { le: '1.25' }, 'kinference_plugin_ttft_ratio_bucket')).toBe(0);
    expect(value(s, 'ratio', { le: '2' }, 'kinference_plugin_ttft_ratio_bucket')).toBe(1);
    expect(value(s, 'ratio', {}, 'kinference_plugin_ttft_ratio_sum')).toBe(2);
  });

  it('bounded labels: invented model names are (other), and at most MAX_MODELS names per process', () => {
    const r = new PluginMetricsRecorder();
    // A model no pod serves (no target, no candidate): never named.
    for (let i = 0; i < 500; i++)
      r.decision({
        ...emptyOutcome('no_pods_in_index', ''),
        model: `invented-${i}`,
      });
    for (let i = 0; i < MAX_MODELS + 10; i++) r.decision(routed(`served-${i}`));
    const s = exported(r);
    const models = new Set(s.get('decisions')!.map((x) => x.labels.model ?? ''));
    expect(models.has(OTHER_MODEL)).toBe(true);
    expect([...models].filter((m) => m.startsWith('invented'))).toEqual([]);
    expect([...models].filter((m) => m.startsWith('served')).length).toBe(MAX_MODELS);
    expect(value(s, 'decisions', { model: OTHER_MODEL, outcome: 'routed' })).toBe(10);
    // A served model keeps its name on later failures (e.g. all its pods unhealthy).
    r.decision({ ...emptyOutcome('all_pods_unhealthy', ''), model: 'served-0' });
    expect(value(exported(r), 'decisions', { model: 'served-0', reason: 'all_pods_unhealthy' })).toBe(1);
  });

  it('the reader skips fields it does not know (a foreign or older writer)', () => {
    const s = samplesOf({
      'not json': '1',
      '["nope","a"]': '2',
      '["decisions","m"]': '3',
      '["flushes"]': '4',
    });
    expect([...s.keys()]).toEqual(['flushes']);
  });
});
