import { afterEach, describe, expect, it } from 'vitest';
import { createRouter, defaultResources, type Router } from '../../../src/router/index.js';
import { qwen3RouterConfig } from '../../helpers/qwen3.js';

/**
 * Bounded work per request (issue #37, item 2) with the real Qwen3 template and tokenizer: a body over the
 * template's budget (messages, nesting), a prompt past the model's context window and a decision past its time
 * budget are routed on load alone, each with its own reason, and the prompt is not tokenized past the window.
 */

const MODEL = 'qwen3';
let routers: Router[] = [];
afterEach(async () => {
  await Promise.all(routers.map((r) => r.close()));
  routers = [];
});

async function routerFor(over: Record<string, unknown>): Promise<Router> {
  const cfg = qwen3RouterConfig({ decision_workers: 0, ...over });
  const res = defaultResources(cfg);
  const now = Date.now();
  await res.index.upsertPodState(
    { model: MODEL, podId: 'p' },
    { address: '10.0.0.1:8000', lastScrapeAtMs: now, lastEventAtMs: now },
  );
  const router = createRouter(cfg, res);
  routers.push(router);
  return router;
}

const body = (messages: unknown[], extra: Record<string, unknown> = {}): string =>
  JSON.stringify({ model: MODEL, messages, ...extra });
const chat = (n: number): unknown[] =>
  Array.from({ length: n }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `turn ${i}` }));

describe('bounded work per request', () => {
  it('routes a body with more messages than max_template_messages on load, without rendering it', async () => {
    const router = await routerFor({ max_template_messages: 100 });
    const ok = await router.route(body(chat(100)));
    expect(ok.fallbackReason).toBeNull();
    const over = await router.route(body(chat(101)));
    expect(over.fallbackReason).toBe('template_budget_exceeded');
    expect(over.fallbackDetail).toContain('101 messages, over max_template_messages 100');
    expect(over.timings.templateMs).toBe(0);
    expect(over.target?.podId).toBe('p');
  });

  it('routes tools or content nested deeper than max_template_depth on load', async () => {
    const router = await routerFor({ max_template_depth: 8 });
    let deep: unknown = 1;
    for (let i = 0; i < 9; i++) deep = { a: deep };
    const tools = (params: unknown): unknown[] => [
      { type: 'function', function: { name: 'f', parameters: params } },
    ];
    // tools → tool → function → parameters: three levels before the schema's own.
    expect(
      (await router.route(body(chat(1), { tools: tools({ type: 'object' }) }))).fallbackReason,
    ).toBeNull();
    const over = await router.route(body(chat(1), { tools: tools(deep) }));
    expect(over.fallbackReason).toBe('template_budget_exceeded');
    expect(over.fallbackDetail).toContain('max_template_depth 8');
    // 100k levels: a bounded walk, no stack overflow.
    const huge = `{"model":"${MODEL}","messages":[{"role":"user","content":"hi"}],"tools":${'['.repeat(100_000)}${']'.repeat(100_000)}}`;
    expect((await router.route(huge)).fallbackReason).toBe('template_budget_exceeded');
  });

  it("never tokenizes past the model's max_model_len, and routes a longer prompt on load", async () => {
    const router = await routerFor({ max_model_len: { [MODEL]: 64, other: 1_000_000 } });
    const short = await router.route(body([{ role: 'user', content: 'hello there' }]));
    expect(short.fallbackReason).toBeNull();
    const long = await router.route(body([{ role: 'user', content: 'word '.repeat(5000) }]));
    expect(long.fallbackReason).toBe('context_window_exceeded');
    expect(long.fallbackDetail).toContain('max_model_len');
    expect(long.promptTokens).toBe(64);
    // Tokenized up to the window only, not the 5,000 words.
    expect(long.promptChars.tokenized).toBeLessThan(2000);
  });

  it('stops a decision past decision_budget_ms after its template, routed on load', async () => {
    const router = await routerFor({ decision_budget_ms: 10, max_template_messages: 100_000 });
    // ~40–100 µs of template per message: 5,000 messages take well over 10 ms.
    const out = await router.route(body(chat(5000)));
    expect(out.fallbackReason).toBe('decision_budget_exceeded');
    expect(out.fallbackDetail).toMatch(/over decision_budget_ms 10/);
    expect(out.timings.tokenizeMs).toBe(0);
    expect(out.target?.podId).toBe('p');
  });
});
