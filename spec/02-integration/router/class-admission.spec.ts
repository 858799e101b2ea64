import { describe, expect, it } from 'vitest';
import type { KvIndex } from '../../../src/index/index.js';
import { PROTECT_MS, SQUEEZE_MS, type CallerFacts } from '../../../src/policies/index.js';
import { createRouter, defaultResources, requestKeys } from '../../../src/router/index.js';
import { qwen3RouterConfig } from '../../helpers/qwen3.js';

/**
 * Class admission through the real router (real tokenizer, template, memory index): a lower class is placed
 * where it pushes no higher class past its objective, else waits, else is shed (sheddable) or served anyway.
 */

const MODEL = 'Qwen/Qwen3-8B';
const NOW = 1_000_000;

function body(system: string, user = 'Summarise the rules.'): string {
  return JSON.stringify({
    model: MODEL,
    messages: [
      { role: 'system', content: system },
      { role: 'user', content: user },
    ],
    stream: true,
  });
}

const prompt = (topic: string): string =>
  `You are the ${topic} desk. Policy ${topic}: answer tersely. `.repeat(60);

const POLICIES = {
  tenant_from: ['header'],
  // A header cannot raise a class above the default: the default is the top class, teams are lowered.
  default_class: 'interactive',
  classes: [
    { name: 'interactive', priority: 100, ttft_objective_ms: 200 },
    { name: 'standard', priority: 0, ttft_objective_ms: 5000 },
    { name: 'batch', priority: -1, ttft_objective_ms: 60000, max_wait_ms: 5000 },
  ],
  tenants: [
    { match: { tenant: 'nightly' }, class: 'batch' },
    { match: { tenant: 'reports' }, class: 'standard' },
  ],
};

const as = (tenant: string | null): CallerFacts => ({
  consumer: null,
  consumerGroups: [],
  headerTenant: tenant,
});

async function fleet(index: KvIndex): Promise<void> {
  for (const [podId, address] of [
    ['pod-a', '10.0.0.1:8000'],
    ['pod-b', '10.0.0.2:8000'],
    ['pod-c', '10.0.0.3:8000'],
  ] as const)
    await index.upsertPodState({ model: MODEL, podId }, { address, lastScrapeAtMs: NOW, lastEventAtMs: NOW });
}

async function setup(over: Record<string, unknown> = {}, cachedOnA?: string) {
  const cfg = qwen3RouterConfig({ policies: POLICIES, ...over });
  const res = defaultResources(cfg);
  await fleet(res.index);
  if (cachedOnA !== undefined) {
    const keys = await requestKeys(cfg, cachedOnA);
    await res.index.apply({ model: MODEL, podId: 'pod-a' }, [{ op: 'store', keys, tier: 'GPU' }]);
  }
  let now = NOW;
  const router = createRouter(cfg, res, { clock: () => now });
  return { router, advance: (ms: number) => (now += ms) };
}

/** Two routers (two Kong nodes) over one index, sharing reservations as share_reservations does; pod-a holds alpha. */
async function twoNodes() {
  const cfg = qwen3RouterConfig({ policies: POLICIES });
  const res = defaultResources(cfg);
  await fleet(res.index);
  const keys = await requestKeys(cfg, body(prompt('alpha')));
  await res.index.apply({ model: MODEL, podId: 'pod-a' }, [{ op: 'store', keys, tier: 'GPU' }]);
  return [
    createRouter(cfg, res, { clock: () => NOW }),
    createRouter(cfg, res, { clock: () => NOW }),
  ] as const;
}

describe('class admission in the router', () => {
  it('protects a class another Kong node placed on the pod (its class travels with the shared reservation)', async () => {
    const [nodeA, nodeB] = await twoNodes();
    const chat = await nodeA.route(body(prompt('alpha'), 'Explain clause nine. '.repeat(60)), as(null));
    expect(chat.target!.podId).toBe('pod-a');
    const batch = await nodeB.route(body(prompt('alpha')), as('nightly'));
    expect(batch.decision.candidates[0]!.podId).toBe('pod-a');
    expect(batch.admission).toMatchObject({ action: 'moved', className: 'batch' });
    expect(batch.target!.podId).not.toBe('pod-a');
    await nodeA.close();
  });

  it('reserved pods keep a class ready from the start: no Kong node fills them with a lower class before it is served', async () => {
    const reserving = {
      ...POLICIES,
      classes: POLICIES.classes.map((c) => (c.name === 'interactive' ? { ...c, reserved_pods: 1 } : c)),
    };
    // Two routers (two Kong nodes) over one index; no interactive request has been served anywhere yet.
    const cfg = qwen3RouterConfig({ policies: reserving });
    const res = defaultResources(cfg);
    await fleet(res.index);
    let now = NOW;
    const nodes = [
      createRouter(cfg, res, { clock: () => now }),
      createRouter(cfg, res, { clock: () => now }),
    ];
    const batchPods = new Set<string>();
    const reservedSeen = new Set<string>();
    for (const [i, t] of ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta'].entries()) {
      const out = await nodes[i % 2]!.route(body(prompt(t)), as('nightly'));
      batchPods.add(out.target!.podId);
      for (const m of (out.admission?.detail ?? '').matchAll(
        /(pod-\w) would push the next request of priority 100/g,
      ))
        reservedSeen.add(m[1]!);
      now += 10;
    }
    // The same pod on both nodes, kept free of the flood; the flood has the other two.
    expect(reservedSeen.size).toBe(1);
    const [reserved] = [...reservedSeen];
    expect(batchPods).toEqual(new Set(['pod-a', 'pod-b', 'pod-c'].filter((p) => p !== reserved)));
    // The class's first request finds it idle: its best pod.
    const chat = await nodes[1]!.route(body(prompt('eta'), 'Explain clause nine.'), as(null));
    expect(chat.target!.podId).toBe(reserved);
    for (const n of nodes) await n.close();
  });

  it('moves a batch request off the pod where an interactive one is queued, to a pod it hurts nobody on', async () => {
    // pod-a holds the system prompt: the best pod for both; the interactive question is long (~0.1 s).
    const { router } = await setup({}, body(prompt('alpha')));
    const first = await router.route(body(prompt('alpha'), 'Explain clause nine. '.repeat(60)), as(null));
    expect(first.tenant).toMatchObject({ name: 'default', serviceClass: { name: 'interactive' } });
    expect(first.admission?.action).toBe('best');
    const at = first.target!.podId;
    expect(at).toBe('pod-a');
    const batch = await router.route(body(prompt('alpha')), as('nightly'));
    expect(batch.tenant).toMatchObject({ name: 'nightly', serviceClass: { name: 'batch', priority: -1 } });
    expect(batch.decision.candidates[0]!.podId).toBe(at);
    expect(batch.admission).toMatchObject({ action: 'moved', className: 'batch' });
    expect(batch.admission!.detail).toContain(`${at} would push`);
    expect(batch.target!.podId).not.toBe(at);
    expect(batch.shed).toBeNull();
    await router.close();
  });

  it('no pod free of higher classes: sheds a sheddable class (429, Retry-After), serves the others on their best pod', async () => {
    const { router } = await setup();
    const pods = new Set<string>();
    for (const t of ['alpha', 'beta', 'gamma'])
      pods.add((await router.route(body(prompt(t)), as(null))).target!.podId);
    expect(pods.size).toBe(3);
    const batch = await router.route(body(prompt('delta')), as('nightly'));
    expect(batch.admission?.action).toBe('shed');
    expect(batch.target).toBeNull();
    expect(batch.shed).toMatchObject({ status: 429, byClass: { waitedMs: 0 } });
    expect(batch.shed!.retryAfterS).toBeGreaterThanOrEqual(1);
    expect(batch.reservationId).toBeNull();
    // Priority 0 is never shed for overload: served on its best pod, and the decision says so.
    const standard = await router.route(body(prompt('delta')), as('reports'));
    expect(standard.admission?.action).toBe('over_objective');
    expect(standard.target!.podId).toBe(standard.decision.candidates[0]!.podId);
    expect(standard.shed).toBeNull();
    await router.close();
  });

  it('a caller that can wait gets `wait`; it re-decides in turn once capacity frees, and is placed', async () => {
    const { router, advance } = await setup();
    const inFlight = [];
    for (const t of ['alpha', 'beta', 'gamma']) inFlight.push(await router.route(body(prompt(t)), as(null)));
    const b = body(prompt('delta'));
    const waiting = await router.route(b, as('nightly'), { canWait: true });
    expect(waiting.admission).toMatchObject({ action: 'wait', waitUntilMs: NOW + 5000 });
    expect(waiting.target).toBeNull();
    expect(waiting.shed).toBeNull();
    const turn = router.waitTurn(waiting);
    // The interactive requests end and their pods stop protecting the class a while later.
    advance(PROTECT_MS + 1000);
    for (const o of inFlight) router.observe(o, null);
    expect(await turn).toBe(true);
    const placed = await router.route(b, as('nightly'), { waitUntilMs: waiting.admission!.waitUntilMs! });
    expect(placed.admission?.action).toBe('best');
    expect(placed.target).not.toBeNull();
    await router.close();
  });

  it('its wait over, a sheddable request is shed and says how long it waited', async () => {
    const { router } = await setup();
    for (const t of ['alpha', 'beta', 'gamma']) await router.route(body(prompt(t)), as(null));
    const b = body(prompt('delta'));
    const waiting = await router.route(b, as('nightly'), { canWait: true });
    const out = await router.route(b, as('nightly'), { waitUntilMs: NOW, waitedMs: 5000 });
    expect(waiting.admission?.action).toBe('wait');
    expect(out.shed).toMatchObject({ status: 429, byClass: { waitedMs: 5000 } });
    await router.close();
  });

  it('a class predicted past its objective is squeezed: every pod protects it, not only the ones that served it', async () => {
    const { router, advance } = await setup();
    // Nothing cached: the interactive question is a cold prefill, predicted past its 200 ms objective.
    const chat = await router.route(body(prompt('alpha'), 'Explain clause nine. '.repeat(60)), as(null));
    expect(chat.decision.chosen!.predictedTtftMs).toBeGreaterThan(200);
    const batch = await router.route(body(prompt('beta')), as('nightly'));
    expect(batch.admission?.action).toBe('shed');
    // The two pods the class was never served on refuse it too, for the class's next request.
    const others = ['pod-a', 'pod-b', 'pod-c'].filter((p) => p !== chat.target!.podId);
    for (const p of others)
      expect(batch.admission!.detail).toContain(`${p} would push the next request of priority 100`);
    // The squeeze over, only the pod that served the class protects it.
    advance(SQUEEZE_MS);
    const later = await router.route(body(prompt('beta')), as('nightly'));
    expect(later.target).not.toBeNull();
    expect(others).toContain(later.target!.podId);
    await router.close();
  });

  it('a measured TTFT past the objective squeezes the class too (the prediction missed it)', async () => {
    const outcomes = [];
    for (const measured of [150, 900]) {
      const { router } = await setup({}, body(prompt('alpha')));
      const chat = await router.route(body(prompt('alpha'), 'Explain clause nine.'), as(null));
      expect(chat.decision.chosen!.predictedTtftMs).toBeLessThan(200);
      router.observe(chat, measured);
      outcomes.push(await router.route(body(prompt('beta')), as('nightly')));
      await router.close();
    }
    expect(outcomes[0]!.target).not.toBeNull();
    expect(outcomes[1]!.admission?.action).toBe('shed');
  });

  it('a squeeze one Kong node measured reaches the others on its next reservation of the class', async () => {
    const [nodeA, nodeB] = await twoNodes();
    const first = await nodeA.route(body(prompt('alpha'), 'Explain clause nine.'), as(null));
    expect(first.decision.chosen!.predictedTtftMs).toBeLessThan(200);
    const before = await nodeB.route(body(prompt('beta')), as('nightly'));
    expect(before.target).not.toBeNull();
    nodeA.observe(first, 900); // answered past the 200 ms objective
    await nodeA.route(body(prompt('alpha'), 'And clause ten?'), as(null));
    const after = await nodeB.route(body(prompt('gamma')), as('nightly'));
    expect(after.admission?.action).toBe('shed');
    for (const p of ['pod-b', 'pod-c'])
      expect(after.admission!.detail).toContain(`${p} would push the next request of priority 100`);
    await nodeA.close();
    await nodeB.close();
  });

  it('a sheddable request is not placed where it would miss its own objective; a non-sheddable one is', async () => {
    const tight = {
      ...POLICIES,
      classes: POLICIES.classes.map((c) => (c.name === 'interactive' ? c : { ...c, ttft_objective_ms: 100 })),
    };
    const { router } = await setup({ policies: tight });
    const batch = await router.route(body(prompt('beta')), as('nightly'));
    expect(batch.decision.chosen!.predictedTtftMs).toBeGreaterThan(100);
    expect(batch.admission?.action).toBe('shed');
    expect(batch.admission!.detail).toMatch(/pod-\w would answer it \d+ ms past its own 100 ms objective/);
    expect(batch.shed).toMatchObject({ status: 429 });
    const standard = await router.route(body(prompt('beta')), as('reports'));
    expect(standard.admission?.action).toBe('best');
    expect(standard.target).not.toBeNull();
    await router.close();
  });

  it('without policies: no tenant, no class admission, same route', async () => {
    const cfg = qwen3RouterConfig();
    const res = defaultResources(cfg);
    await fleet(res.index);
    const router = createRouter(cfg, res, { clock: () => NOW });
    for (const t of ['alpha', 'beta', 'gamma']) await router.route(body(prompt(t)));
    const out = await router.route(body(prompt('delta')), as('nightly'), { canWait: true });
    expect(out.tenant).toBeNull();
    expect(out.admission).toBeNull();
    expect(out.shed).toBeNull();
    expect(out.target).not.toBeNull();
    await router.close();
  });
});
