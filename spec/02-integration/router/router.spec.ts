import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PluginConfig } from '../../../src/config/plugin-config.js';
import type { KvIndex } from '../../../src/index/index.js';
import { createRouter, defaultResources, requestKeys } from '../../../src/router/index.js';
import { qwen3RouterConfig } from '../../helpers/qwen3.js';
import { waitFor } from '../../helpers/ports.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';

const MODEL = 'Qwen/Qwen3-8B';
const SYSTEM = 'You are a meticulous assistant for the ACME support desk. '.repeat(40);

function body(user: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    model: MODEL,
    messages: [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: user },
    ],
    stream: true,
    ...extra,
  });
}

function config(over: Partial<PluginConfig> = {}): PluginConfig {
  return qwen3RouterConfig({ lora_adapters: { 'sql-lora': MODEL }, ...over });
}

const NOW = 1_000_000;

async function fleet(index: KvIndex): Promise<void> {
  for (const [podId, address] of [
    ['pod-a', '10.0.0.1:8000'],
    ['pod-b', '10.0.0.2:8000'],
    ['pod-c', '10.0.0.3:8000'],
  ] as const)
    await index.upsertPodState({ model: MODEL, podId }, { address, lastScrapeAtMs: NOW, lastEventAtMs: NOW });
}

describe('router pipeline (real tokenizer, real template, both indexes)', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  for (const kind of ['memory', 'redis'] as const) {
    it(`${kind}: routes to the pod holding the shared system prompt`, async () => {
      const cfg = config(
        kind === 'redis' ? { index: 'redis', redis_url: redis.url, redis_key_prefix: 'rt' } : {},
      );
      const res = defaultResources(cfg);
      await fleet(res.index);
      const first = await requestKeys(cfg, body('What is the refund policy?'));
      await res.index.apply({ model: MODEL, podId: 'pod-b' }, [{ op: 'store', keys: first, tier: 'GPU' }]);

      const router = createRouter(cfg, res, { clock: () => NOW });
      const out = await router.route(body(`How do I reset my ${kind} password?`));
      expect(out.fallbackReason).toBeNull();
      expect(out.target).toEqual({ host: '10.0.0.2', port: 8000, podId: 'pod-b' });
      const b = out.decision.candidates.find((c) => c.podId === 'pod-b')!;
      const a = out.decision.candidates.find((c) => c.podId === 'pod-a')!;
      expect(b.cachedTokens).toBeGreaterThan(400); // the system prompt, not the new user turn
      expect(b.cachedTokens).toBeLessThan(out.promptTokens);
      expect(a.cachedTokens).toBe(0);
      expect(out.blocks).toBe(Math.floor(out.promptTokens / 16));
      // The system prompt's segment was tokenized for `first`; only the new question is tokenized now.
      expect(out.promptChars.cached).toBeGreaterThan(2000);
      expect(out.promptChars.tokenized).toBeGreaterThan(0);
      expect(out.promptChars.tokenized).toBeLessThan(200);
      await router.close();
    });
  }

  it('LoRA adapters and cache_salt select their own key chains', async () => {
    const cfg = config();
    const res = defaultResources(cfg);
    await fleet(res.index);
    const plain = await requestKeys(cfg, body('q'));
    await res.index.apply({ model: MODEL, podId: 'pod-c' }, [{ op: 'store', keys: plain, tier: 'GPU' }]);
    const router = createRouter(cfg, res, { clock: () => NOW });
    const same = await router.route(body('q'));
    expect(same.target?.podId).toBe('pod-c');
    const salted = await router.route(body('q', { cache_salt: 'tenant-1' }));
    expect(salted.decision.candidates.every((c) => c.cachedTokens === 0)).toBe(true);
    const lora = await router.route(body('q', { model: 'sql-lora' }));
    expect(lora.model).toBe(MODEL);
    expect(lora.lora).toBe('sql-lora');
    expect(lora.decision.candidates.every((c) => c.cachedTokens === 0)).toBe(true);
  });

  it('spreads a burst of cold requests with its own reservations, and releases them on observe', async () => {
    const cfg = config();
    const res = defaultResources(cfg);
    await fleet(res.index);
    const router = createRouter(cfg, res, { clock: () => NOW });
    const picks = [];
    for (let i = 0; i < 3; i++) picks.push(await router.route(body(`cold question ${i}`)));
    expect(new Set(picks.map((p) => p.target?.podId)).size).toBe(3);
    // The first token arrived on one pod: its reserved work is done, so it is the least busy again.
    const released = picks[1]!;
    router.observe(released, null); // a non-streamed answer: released, nothing learned
    const next = await router.route(body('cold question 3'));
    expect(next.target?.podId).toBe(released.target?.podId);
  });

  it('learns from observed latency only when latency_feedback is on', async () => {
    for (const latency_feedback of [false, true]) {
      const cfg = config({ latency_feedback, reservation_ttl_ms: 0 });
      const res = defaultResources(cfg);
      await fleet(res.index);
      const router = createRouter(cfg, res, { clock: () => NOW });
      const first = await router.route(body('calibrate me'));
      const pod = first.target!.podId;
      for (let i = 0; i < 20; i++) router.observe(first, first.decision.chosen!.modelTtftMs * 3);
      const again = await router.route(body('calibrate me'));
      const c = again.decision.candidates.find((x) => x.podId === pod)!;
      if (latency_feedback) expect(c.ttftFactor).toBeGreaterThan(2);
      else expect(c.ttftFactor).toBe(1);
    }
  });

  it('fails open: bad bodies, index errors and timeouts still give a target or leave Kong’s', async () => {
    const cfg = config({ redis_timeout_ms: 30 });
    const res = defaultResources(cfg);
    await fleet(res.index);
    let mode: 'ok' | 'throw' | 'hang' = 'ok';
    const flaky: KvIndex = {
      ...res.index,
      apply: (p, o) => res.index.apply(p, o),
      upsertPodState: (p, s) => res.index.upsertPodState(p, s),
      removePod: (p) => res.index.removePod(p),
      listPods: (m) => res.index.listPods(m),
      close: () => res.index.close(),
      lookup: (m, k) =>
        mode === 'ok'
          ? res.index.lookup(m, k)
          : mode === 'throw'
            ? Promise.reject(new Error('connection refused'))
            : new Promise(() => {}),
    };
    const router = createRouter(cfg, { ...res, index: flaky }, { clock: () => NOW });
    await router.route(body('warm the last-known pod list'));

    expect((await router.route('{not json')).fallbackReason).toBe('body_not_json');
    expect((await router.route('{not json')).target).toBeNull();
    const noChat = await router.route(JSON.stringify({ model: MODEL, messages: 'hi' }));
    expect(noChat.fallbackReason).toBe('body_not_chat');
    expect(noChat.target).not.toBeNull(); // model known → least-loaded among its pods

    mode = 'throw';
    const err = await router.route(body('x'));
    expect(err.fallbackReason).toBe('index_error');
    expect(err.target).not.toBeNull();
    mode = 'hang';
    const slow = await router.route(body('y'));
    expect(slow.fallbackReason).toBe('index_timeout');
    expect(slow.target).not.toBeNull();
    expect(slow.timings.lookupMs).toBeLessThan(1000);

    const kongDefault = createRouter(config({ fallback: 'kong-default' }), { ...res, index: flaky });
    expect((await kongDefault.route(body('z'))).target).toBeNull();
  });

  it('never chooses a pod Kong cannot be sent to (no address yet); with none left, says so', async () => {
    const cfg = config();
    const res = defaultResources(cfg);
    // pod-a is registered by a state write without an address (the collector's resync probe after Redis
    // lost its data), idle; pod-b is busy but routable.
    await res.index.upsertPodState(
      { model: MODEL, podId: 'pod-a' },
      { resyncing: true, lastScrapeAtMs: NOW },
    );
    await res.index.upsertPodState(
      { model: MODEL, podId: 'pod-b' },
      { address: '10.0.0.2:8000', running: 3, lastScrapeAtMs: NOW, lastEventAtMs: NOW },
    );
    const router = createRouter(cfg, res, { clock: () => NOW });
    const out = await router.route(body('which pod?'));
    expect(out.target?.podId).toBe('pod-b');
    expect(out.fallbackReason).toBeNull();

    await res.index.removePod({ model: MODEL, podId: 'pod-b' });
    const none = await router.route(body('and now?'));
    expect(none.target).toBeNull();
    expect(none.fallbackReason).toBe('no_pods_in_index');
    expect(none.fallbackDetail).toContain('no pod of model Qwen/Qwen3-8B has a host:port address: pod-a ""');
  });

  it('gives the first lookup (which also connects) a startup budget, later ones redis_timeout_ms', async () => {
    const cfg = config({ redis_timeout_ms: 20 });
    const res = defaultResources(cfg);
    await fleet(res.index);
    const slow: KvIndex = {
      ...res.index,
      lookup: (m, k) => new Promise((resolve) => setTimeout(() => resolve(res.index.lookup(m, k)), 150)),
      close: () => res.index.close(),
    };
    const router = createRouter(cfg, { ...res, index: slow }, { clock: () => NOW });
    expect((await router.route(body('first'))).fallbackReason).toBeNull();
    expect((await router.route(body('second'))).fallbackReason).toBe('index_timeout');
  });

  it('a broken tokenizer or template is a fallback reason, not an exception', async () => {
    const cfg = config({
      tokenizer: 'hf:/nonexistent/tokenizer.json',
      model_pods: { [MODEL]: ['10.9.9.9:8000'] },
    });
    const router = createRouter(cfg, defaultResources(cfg));
    const out = await router.route(body('q'));
    expect(out.fallbackReason).toBe('tokenizer_error');
    expect(out.target).toEqual({ host: '10.9.9.9', port: 8000, podId: '10.9.9.9:8000' });
  });

  it('a model named like an Object member ("constructor", "__proto__") is just an unknown model', async () => {
    for (const lora of [true, false]) {
      const cfg = qwen3RouterConfig({
        model_pods: { [MODEL]: ['10.9.9.9:8000'] },
        ...(lora ? { lora_adapters: { 'sql-lora': MODEL } } : {}),
      });
      const router = createRouter(cfg, defaultResources(cfg));
      for (const model of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
        const out = await router.route(JSON.stringify({ model, messages: [{ role: 'user', content: 'q' }] }));
        expect(out.model).toBe(model);
        expect(out.lora).toBeNull();
        expect(out.fallbackReason).toBe('no_pods_in_index');
        expect(out.target).toBeNull();
      }
      await router.close();
    }
  });

  it('sheds with 429 only when opted in and every pod is over the SLO because of its queue', async () => {
    const cfg = config({ shed_ttft_slo_ms: 2000 });
    const res = defaultResources(cfg);
    await fleet(res.index);
    // 10 queued prompts of 1,000 uncached tokens on every pod: ~3.3 s of queue before this request.
    for (const podId of ['pod-a', 'pod-b', 'pod-c'])
      await res.index.upsertPodState({ model: MODEL, podId }, { waiting: 10, meanQueuedPrefillTokens: 1000 });
    const out = await createRouter(cfg, res, { clock: () => NOW }).route(body('q'));
    const best = out.decision.chosen!;
    expect(best.queueMs).toBeGreaterThan(2000);
    expect(out.shed).toEqual({ status: 429, retryAfterS: Math.ceil((best.predictedTtftMs - 2000) / 1000) });
    expect(out.target).toBeNull();
    const off = await createRouter(config(), res, { clock: () => NOW }).route(body('q'));
    expect(off.shed).toBeNull();
  });

  it('asks a pod for reused-block reports only within kv_reuse_reports_ms of a partial rebuild, and only for bodies without vllm_xargs', async () => {
    const cfg = config({ kv_reuse_reports_ms: 60_000 });
    const res = defaultResources(cfg);
    await fleet(res.index);
    const keys = await requestKeys(cfg, body('q'));
    await res.index.apply({ model: MODEL, podId: 'pod-b' }, [{ op: 'store', keys, tier: 'GPU' }]);
    const route = async (nowMs: number, b = body('q'), c = cfg) =>
      createRouter(c, res, { clock: () => nowMs }).route(b);

    // A complete index (partialSinceMs 0): nothing to win back.
    expect((await route(NOW)).kvReuseReport).toBe(false);

    await res.index.upsertPodState({ model: MODEL, podId: 'pod-b' }, { partialSinceMs: NOW - 10_000 });
    const out = await route(NOW);
    expect(out.target?.podId).toBe('pod-b');
    expect(out.kvReuseReport).toBe(true);
    expect(out.decision.chosen!.partialSinceMs).toBe(NOW - 10_000);
    expect(out.decision.chosen!.reasons.join('; ')).toMatch(
      /rebuilt without the pod's whole event history 10 s ago/,
    );
    // The window is over; the feature is off; the client has its own vllm_xargs (even null).
    expect((await route(NOW + 50_000)).kvReuseReport).toBe(false);
    expect((await route(NOW, body('q'), config({ kv_reuse_reports_ms: 0 }))).kvReuseReport).toBe(false);
    expect((await route(NOW, body('q', { vllm_xargs: { priority_hint: 1 } }))).kvReuseReport).toBe(false);
    expect((await route(NOW, body('q', { vllm_xargs: null }))).kvReuseReport).toBe(false);
    // Another pod's partial rebuild says nothing about the chosen one.
    await res.index.upsertPodState({ model: MODEL, podId: 'pod-b' }, { partialSinceMs: 0 });
    await res.index.upsertPodState({ model: MODEL, podId: 'pod-a' }, { partialSinceMs: NOW - 1000 });
    const other = await route(NOW);
    expect(other.target?.podId).toBe('pod-b');
    expect(other.kvReuseReport).toBe(false);
  });

  it('credits a partially rebuilt pod with the prompts this router sent it before, which its index lost', async () => {
    for (const window of [60_000, 0]) {
      const cfg = config({ kv_reuse_reports_ms: window, reservation_ttl_ms: 0 });
      const res = defaultResources(cfg);
      await fleet(res.index);
      const keys = await requestKeys(cfg, body('q'));
      const pod = { model: MODEL, podId: 'pod-b' };
      await res.index.apply(pod, [{ op: 'store', keys, tier: 'GPU' }]);
      const router = createRouter(cfg, res, { clock: () => NOW });
      expect((await router.route(body('q'))).target?.podId).toBe('pod-b');

      // A collector restart: pod-b's blocks are gone from the index, and it says the rebuild was partial.
      await res.index.apply(pod, [{ op: 'clear' }]);
      await res.index.upsertPodState(pod, { partialSinceMs: NOW - 5_000 });
      const out = await router.route(body('another question'));
      const b = out.decision.candidates.find((c) => c.podId === 'pod-b')!;
      if (window > 0) {
        expect(out.target?.podId).toBe('pod-b');
        expect(b.cachedTokens).toBeGreaterThanOrEqual(Math.floor(keys.length / 16) * 16 * 16);
        expect(b.reasons).toContain(
          "cached credit includes a prompt this router sent here, which the pod's rebuilt index lost",
        );
      } else {
        // Off: only the index counts, and it has nothing; pod-a wins the tie on its id.
        expect(b.cachedTokens).toBe(0);
        expect(out.target?.podId).toBe('pod-a');
      }
      // A complete index is the truth: the memory is not consulted.
      await res.index.upsertPodState(pod, { partialSinceMs: 0 });
      const after = await router.route(body('a third question'));
      expect(after.decision.candidates.find((c) => c.podId === 'pod-b')!.cachedTokens).toBe(0);
      await router.close();
    }
  });

  it('two Kong nodes share their reservations through Redis: each counts the other’s work in flight, until its response', async () => {
    for (const share of [true, false]) {
      const cfg = config({
        index: 'redis',
        redis_url: redis.url,
        redis_key_prefix: `share-${share}`,
        share_reservations: share,
        redis_timeout_ms: 2000,
      });
      const [resA, resB] = [defaultResources(cfg), defaultResources(cfg)];
      await fleet(resA.index);
      const nodeA = createRouter(cfg, resA, { clock: () => NOW });
      const nodeB = createRouter(cfg, resB, { clock: () => NOW });
      // A cold prompt of ~600 tokens: nodeA sends it to pod-a (every pod idle, pod-a first by id).
      const first = await nodeA.route(body('What is the refund policy?'));
      expect(first.target?.podId).toBe('pod-a');
      // Another cold prompt through nodeB: with sharing it sees pod-a busy and picks pod-b.
      const second = await nodeB.route(body('How do I reset my password?'));
      const seen = second.decision.candidates.find((c) => c.podId === 'pod-a')!;
      if (share) {
        expect(seen.queuedTokens).toBe(first.decision.chosen!.uncachedTokens);
        expect(second.target?.podId).toBe('pod-b');
      } else {
        expect(seen.queuedTokens).toBe(0);
        expect(second.target?.podId).toBe('pod-a');
      }
      // nodeA does not count its own reservation twice.
      const own = await nodeA.route(body('A third question'));
      expect(own.decision.candidates.find((c) => c.podId === 'pod-a')!.queuedTokens).toBe(
        first.decision.chosen!.uncachedTokens,
      );
      // Once nodeA has seen the responses, nodeB stops counting them.
      nodeA.observe(first, null);
      nodeA.observe(own, null);
      // Only nodeB's own (`second`) is left shared.
      await waitFor(
        "nodeA's reservations ended in Redis",
        async () => (await resB.index.sharedReservations(MODEL, 0, 100)).length === (share ? 1 : 0),
      );
      const after = await nodeB.route(body('A fourth question'));
      // What is left on pod-a is nodeB's own `second`, if it went there (without sharing).
      const left = second.target?.podId === 'pod-a' ? second.decision.chosen!.uncachedTokens : 0;
      expect(after.decision.candidates.find((c) => c.podId === 'pod-a')!.queuedTokens).toBe(left);
      await Promise.all([nodeA.close(), nodeB.close()]);
    }
  });

  it('serves a request over the SLO on an idle pod: waiting would not bring it within', async () => {
    const cfg = config({ shed_ttft_slo_ms: 1 });
    const res = defaultResources(cfg);
    await fleet(res.index);
    const out = await createRouter(cfg, res, { clock: () => NOW }).route(body('q'));
    expect(out.decision.chosen!.predictedTtftMs).toBeGreaterThan(1);
    expect(out.shed).toBeNull();
    expect(out.target).not.toBeNull();
  });

  it('caps tokenization of a 10 MB prompt and says it truncated', async () => {
    // The time budget is not what this checks: parsing and rendering 10 MB on a loaded host can pass 500 ms.
    const cfg = config({
      max_prompt_tokens: 4096,
      max_body_bytes: 16 * 1024 * 1024,
      decision_budget_ms: 60_000,
    });
    const res = defaultResources(cfg);
    await fleet(res.index);
    const out = await createRouter(cfg, res, { clock: () => NOW }).route(body('word '.repeat(2_000_000)));
    expect(out.truncated).toBe(true);
    expect(out.promptTokens).toBeLessThanOrEqual(4096);
    expect(out.fallbackReason).toBe('prompt_truncated');
    expect(out.target).not.toBeNull();
  });
});
