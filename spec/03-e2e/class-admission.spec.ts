import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MODEL } from '../02-integration/emulator/emulator-fleet.js';
import { startFullSystem, type FullSystem } from '../helpers/full-system.js';

/**
 * Overload by class end to end: emulated pods → collector → Redis → the plugin in the real plugin server
 * behind the stand-in. It checks the mechanism, not a machine's speed: one pod, and an interactive objective
 * of 1 ms, so once the interactive team has been served there, any batch prefill on the pod would push the
 * team's next request past its objective, however fast the machine. Then the batch team waits its
 * max_wait_ms for room, is shed with 429, Retry-After and an OpenAI-style error body, while the interactive
 * team is served throughout. Before any interactive request, the same batch request is served: nothing is
 * protected yet. Tenants come from a header (the stand-in has no consumers here); with no consumer a header
 * can only lower the class, so the default class is the top one and the batch team is named down to batch.
 */

const OBJECTIVE_MS = 1;
const MAX_WAIT_MS = 1500;
let sys: FullSystem;

const POLICIES = {
  tenant_from: ['header'],
  default_class: 'interactive',
  classes: [
    { name: 'interactive', priority: 100, ttft_objective_ms: OBJECTIVE_MS },
    { name: 'batch', priority: -1, ttft_objective_ms: 600_000, max_wait_ms: MAX_WAIT_MS },
  ],
  tenants: [{ match: { tenant: 'nightly' }, class: 'batch' }],
};
function chat(system: string, user: string, maxTokens: number): string {
  return JSON.stringify({
    model: MODEL,
    messages: [
      { role: 'system', content: system },
      { role: 'user', content: user },
    ],
    max_tokens: maxTokens,
    stream: true,
  });
}

/** Posts a streamed chat; resolves with the status, headers, time to the first byte of the body, and the body. */
async function post(
  body: string,
  tenant: string | null,
): Promise<{ status: number; headers: Headers; ttftMs: number; text: string }> {
  const t0 = performance.now();
  const r = await fetch(`${sys.gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(tenant ? { 'x-tenant-id': tenant } : {}) },
    body,
  });
  const reader = r.body!.getReader();
  const first = await reader.read();
  const ttftMs = performance.now() - t0;
  let text = first.value ? new TextDecoder().decode(first.value) : '';
  for (let c = await reader.read(); !c.done; c = await reader.read())
    text += new TextDecoder().decode(c.value);
  return { status: r.status, headers: r.headers, ttftMs, text };
}

const SYSTEMS = ['alpha', 'beta', 'gamma'].map((t) =>
  `You are the ${t} support desk. Be precise. `.repeat(40),
);

/** A long batch prompt (~4k tokens): its prefill is never free. */
const batchJob = (i: number): string =>
  chat(`Batch job ${i}: ${'summarise the following ledger line by line. '.repeat(450)}`, 'go', 4);

beforeAll(async () => {
  sys = await startFullSystem('kinf-e2e-class', { policies: POLICIES, redis_timeout_ms: 500 }, { pods: 1 });
}, 240_000); // pods, collector, Redis, plugin build and tokenizer load: slow on a loaded runner

afterAll(async () => {
  await sys?.close();
});

describe('e2e: overload by class (policies) through the real plugin server', () => {
  it('the batch team is served while nothing is protected, then waits and is shed; interactive is served', async () => {
    // Nobody of a higher class served yet: the batch request takes the pod at once.
    const first = await post(batchJob(-1), 'nightly');
    expect(first.status).toBe(200);
    expect(first.text).toContain('data: [DONE]');

    // The interactive team is served (the top class is never blocked); the pod now protects its next turn.
    for (const r of await Promise.all(SYSTEMS.map((s) => post(chat(s, 'first question', 4), null))))
      expect(r.status).toBe(200);

    // The flood, with the interactive team chatting meanwhile.
    const interactive: number[] = [];
    const chatting = (async () => {
      for (let turn = 0; turn < 2; turn++)
        for (const r of await Promise.all(
          SYSTEMS.map((s, i) => post(chat(s, `turn ${turn} of chat ${i}`, 8), null)),
        )) {
          expect(r.status).toBe(200);
          expect(r.text).toContain('data: [DONE]');
          interactive.push(r.ttftMs);
        }
    })();
    const flood = Promise.all(Array.from({ length: 6 }, (_, i) => post(batchJob(i), 'nightly')));
    const [, batch] = await Promise.all([chatting, flood]);

    expect(interactive).toHaveLength(6);
    for (const r of batch) {
      expect(r.status).toBe(429);
      // It waited its class's max_wait_ms for room before it was shed.
      expect(r.ttftMs).toBeGreaterThanOrEqual(MAX_WAIT_MS);
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      const body = JSON.parse(r.text) as { error: { type: string; code: string; message: string } };
      expect(body).toMatchObject({ error: { type: 'server_overloaded', code: 'class_overloaded' } });
      expect(body.error.message).toContain('class "batch"');
      expect(body.error.message).toMatch(/after waiting \d+ ms/);
    }
    expect(sys.service.requests.length).toBe(0); // nothing fell through to the service url
  }, 120_000);
});
