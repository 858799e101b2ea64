import { describe, expect, it } from 'vitest';
import type { PluginConfig } from '../../../src/config/plugin-config.js';
import type { KvIndex } from '../../../src/index/index.js';
import { createRouter, defaultResources, requestKeys } from '../../../src/router/index.js';
import type { UpstreamReport } from '../../../src/router/router.js';
import { qwen3RouterConfig } from '../../helpers/qwen3.js';

/**
 * Passive health (the router's view of its own upstream failures), load-only routing of bodies that are
 * not chat requests, and `fallback: kong-default` when no pod is healthy: the real tokenizer, template and
 * in-memory index, a controlled clock.
 */

const MODEL = 'Qwen/Qwen3-8B';
const SYSTEM = 'You are a meticulous assistant for the ACME support desk. '.repeat(40);
const FAILED: UpstreamReport = { failed: true, detail: 'connection failed (502)' };
const OK: UpstreamReport = { failed: false, detail: 'answered 200' };
const NOW = 1_000_000;

const chat = (user: string): string =>
  JSON.stringify({
    model: MODEL,
    messages: [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: user },
    ],
    stream: true,
  });
const completion = JSON.stringify({ model: MODEL, prompt: 'hello', max_tokens: 4 });

async function setup(over: Partial<PluginConfig> = {}, pods = ['pod-a', 'pod-b', 'pod-c']) {
  const cfg = qwen3RouterConfig(over);
  const res = defaultResources(cfg);
  for (const [i, podId] of pods.entries())
    await res.index.upsertPodState(
      { model: MODEL, podId },
      { address: `10.0.0.${i + 1}:8000`, lastScrapeAtMs: NOW, lastEventAtMs: NOW },
    );
  // pod-a holds the shared system prompt: every chat request prefers it.
  const keys = await requestKeys(cfg, chat('warm'));
  await res.index.apply({ model: MODEL, podId: pods[0]! }, [{ op: 'store', keys, tier: 'GPU' }]);
  let now = NOW;
  const router = createRouter(cfg, res, { clock: () => now });
  return { router, index: res.index, advance: (ms: number) => (now += ms) };
}

describe('passive health: a pod whose connection failed is kept out for a while', () => {
  it('skips the failed prefix holder, says why, and takes it back after the backoff or a success', async () => {
    const { router, advance } = await setup();
    const first = await router.route(chat('q1'));
    expect(first.target?.podId).toBe('pod-a');
    router.observe(first, null, FAILED);

    const next = await router.route(chat('q2'));
    expect(next.target?.podId).not.toBe('pod-a');
    expect(next.fallbackReason).toBeNull();
    const a = next.decision.candidates.find((p) => p.podId === 'pod-a')!;
    expect(a.healthy).toBe(false);
    expect(a.reasons.join('; ')).toMatch(/skipped: upstream connection failed \(502\), 1 failed try/);

    // ~1 s later pod-a is a candidate again (the next request probes it) ...
    advance(1001);
    const probe = await router.route(chat('q3'));
    expect(probe.target?.podId).toBe('pod-a');
    // ... it fails again: out for 2 s this time
    router.observe(probe, null, FAILED);
    advance(1500);
    expect((await router.route(chat('q4'))).target?.podId).not.toBe('pod-a');
    advance(600);
    const again = await router.route(chat('q5'));
    expect(again.target?.podId).toBe('pod-a');
    // a success ends it and resets the backoff to 1 s
    router.observe(again, null, OK);
    const after = await router.route(chat('q6'));
    expect(after.target?.podId).toBe('pod-a');
    router.observe(after, null, FAILED);
    advance(1001);
    expect((await router.route(chat('q7'))).target?.podId).toBe('pod-a');
  });

  it('requests in flight when the pod died neither grow the backoff nor end it by succeeding', async () => {
    const { router, advance } = await setup();
    const inFlight = [await router.route(chat('a')), await router.route(chat('b'))];
    const streaming = await router.route(chat('c'));
    expect(inFlight.map((o) => o.target?.podId)).toEqual(['pod-a', 'pod-a']);
    expect(streaming.target?.podId).toBe('pod-a');
    router.observe(inFlight[0]!, null, FAILED);
    router.observe(inFlight[1]!, null, FAILED); // same outage: still 1 strike
    router.observe(streaming, null, OK); // a stream that had started before: says nothing about now
    const skipped = await router.route(chat('d'));
    expect(skipped.target?.podId).not.toBe('pod-a');
    expect(skipped.decision.candidates.find((p) => p.podId === 'pod-a')!.reasons.join()).toMatch(
      /1 failed try/,
    );
    advance(1001);
    expect((await router.route(chat('e'))).target?.podId).toBe('pod-a');
  });

  it('the exponential backoff is capped', async () => {
    const { router, advance } = await setup({}, ['pod-a', 'pod-b']);
    for (let i = 0; i < 12; i++) {
      advance(60_000);
      const o = await router.route(chat(`p${i}`));
      expect(o.target?.podId).toBe('pod-a');
      router.observe(o, null, FAILED);
    }
    advance(29_000);
    expect((await router.route(chat('x'))).target?.podId).toBe('pod-b');
    advance(1_001);
    expect((await router.route(chat('y'))).target?.podId).toBe('pod-a');
  });

  it('still routes to a failed pod when it is the only one left (least-loaded)', async () => {
    const { router } = await setup({}, ['pod-a']);
    const o = await router.route(chat('q'));
    router.observe(o, null, FAILED);
    const only = await router.route(chat('q2'));
    expect(only.target?.podId).toBe('pod-a');
    expect(only.fallbackReason).toBe('all_pods_unhealthy');
    expect(only.fallbackDetail).toBe('no healthy pod: pod-a upstream failures');
  });

  it('prefers a pod only the collector calls unhealthy over one that just failed, when nothing is healthy', async () => {
    const { router, index } = await setup({}, ['pod-a', 'pod-b']);
    await index.upsertPodState({ model: MODEL, podId: 'pod-b' }, { healthy: false });
    const o = await router.route(chat('q'));
    expect(o.target?.podId).toBe('pod-a');
    router.observe(o, null, FAILED);
    const next = await router.route(chat('q2'));
    expect(next.fallbackReason).toBe('all_pods_unhealthy');
    expect(next.target?.podId).toBe('pod-b');
  });

  it('an outcome without a target, or without a report, changes nothing', async () => {
    const { router } = await setup();
    const o = await router.route(chat('q'));
    router.observe(o, null, null);
    router.observe({ ...o, target: null }, null, FAILED);
    expect((await router.route(chat('q2'))).target?.podId).toBe('pod-a');
  });
});

describe('bodies that are not chat requests are routed on load among healthy pods', () => {
  it('looks the pods up without block keys (never a dead or failed pod)', async () => {
    const { router, index } = await setup({ model_pods: { [MODEL]: ['10.9.9.9:8000'] } });
    await index.upsertPodState({ model: MODEL, podId: 'pod-a' }, { healthy: false });
    await index.upsertPodState({ model: MODEL, podId: 'pod-c' }, { running: 5, waiting: 3 });
    const out = await router.route(completion);
    expect(out.fallbackReason).toBe('body_not_chat');
    expect(out.target?.podId).toBe('pod-b');
    router.observe(out, null, FAILED);
    expect((await router.route(completion)).target?.podId).toBe('pod-c');
  });

  it('uses model_pods only when the index has no pod for the model', async () => {
    const { router } = await setup({ model_pods: { 'other/model': ['10.9.9.9:8000'] } });
    const out = await router.route(JSON.stringify({ model: 'other/model', prompt: 'x' }));
    expect(out.target).toEqual({ host: '10.9.9.9', port: 8000, podId: '10.9.9.9:8000' });
  });

  it('a chat request whose pods all left the index goes to model_pods, not to the pods last seen', async () => {
    const { router, index } = await setup({ model_pods: { [MODEL]: ['10.9.9.9:8000'] } });
    expect((await router.route(chat('before'))).target?.podId).toMatch(/^pod-/);
    for (const podId of ['pod-a', 'pod-b', 'pod-c']) await index.removePod({ model: MODEL, podId });
    const out = await router.route(chat('after'));
    expect(out.fallbackReason).toBe('no_pods_in_index');
    expect(out.target?.podId).toBe('10.9.9.9:8000');
  });

  it('falls back to the last known pods, then model_pods, when the index fails', async () => {
    const cfg = qwen3RouterConfig({ redis_timeout_ms: 30, model_pods: { [MODEL]: ['10.9.9.9:8000'] } });
    const res = defaultResources(cfg);
    let down = true;
    const flaky: KvIndex = {
      ...res.index,
      lookup: (m, k) => (down ? Promise.reject(new Error('connection refused')) : res.index.lookup(m, k)),
    };
    await res.index.upsertPodState({ model: MODEL, podId: 'pod-a' }, { address: '10.0.0.1:8000' });
    const router = createRouter(cfg, { ...res, index: flaky });
    const cold = await router.route(completion);
    expect(cold.target?.podId).toBe('10.9.9.9:8000');
    expect(cold.fallbackDetail).toMatch(/index: connection refused/);
    down = false;
    expect((await router.route(completion)).target?.podId).toBe('pod-a');
    down = true;
    expect((await router.route(completion)).target?.podId).toBe('pod-a');
  });
});

describe('fallback: kong-default', () => {
  it('leaves Kong’s target when no pod is healthy, and still picks a pod when one is', async () => {
    const { router, index } = await setup({ fallback: 'kong-default' });
    for (const podId of ['pod-a', 'pod-b', 'pod-c'])
      await index.upsertPodState({ model: MODEL, podId }, { healthy: false });
    const none = await router.route(chat('q'));
    expect(none.fallbackReason).toBe('all_pods_unhealthy');
    expect(none.target).toBeNull();
    expect(none.reservationId).toBeNull();
    expect(none.decision.chosen).toBeNull();
    expect(none.decision.candidates).toHaveLength(3);

    await index.upsertPodState({ model: MODEL, podId: 'pod-b' }, { healthy: true });
    expect((await router.route(chat('q'))).target?.podId).toBe('pod-b');
  });

  it('counts a pod kept out after an upstream failure as unhealthy', async () => {
    const { router } = await setup({ fallback: 'kong-default' }, ['pod-a']);
    const o = await router.route(chat('q'));
    expect(o.target?.podId).toBe('pod-a');
    router.observe(o, null, FAILED);
    expect((await router.route(chat('q2'))).target).toBeNull();
  });
});
