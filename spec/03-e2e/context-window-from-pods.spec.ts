import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upstreamHeadersOf } from '../../harness/plugin-warm-up.js';
import { MODEL } from '../02-integration/emulator/emulator-fleet.js';
import { postChat, startFullSystem, type FullSystem } from '../helpers/full-system.js';
import { waitFor } from '../helpers/ports.js';

/**
 * The context window from the pods end to end (issue #37, item 2), nothing faked: emulated vLLM pods started
 * with a small max_model_len answer it in /v1/models; the collector reads it into each pod's state in Redis;
 * the plugin, whose config gives no max_model_len, routes a prompt past it with context_window_exceeded (the
 * pods refuse such a prompt, 400) and a prompt within it on prediction. Each decision is read from the
 * upstream headers its access phase set (expose_headers).
 */

const WINDOW = 512;
let sys: FullSystem;
/** Per request through the gateway, in order: its x-kinference-fallback ("none" when routed on prediction). */
const reasons: string[] = [];

beforeAll(async () => {
  sys = await startFullSystem(
    'kinf-e2e-window',
    { expose_headers: true },
    {
      pods: 2,
      emulator: { max_model_len: WINDOW },
      gateway: {
        onEvent: (e) => {
          if (e.phase !== 'access' || e.outcome.kind !== 'done') return;
          const h = upstreamHeadersOf(e.outcome.result);
          if (h) reasons.push(h['x-kinference-fallback'] ?? 'none');
        },
      },
    },
  );
}, 120_000);

afterAll(async () => {
  await sys?.close();
});

const chat = (content: string): Record<string, unknown> => ({
  model: MODEL,
  messages: [{ role: 'user', content }],
  max_tokens: 16,
});

/** Sends one chat through the gateway: its status and the decision the plugin made for it. */
async function send(body: Record<string, unknown>): Promise<[number, string]> {
  const before = reasons.length;
  const r = await postChat(sys.gw.url, body);
  await r.arrayBuffer();
  await waitFor('the access phase of the request', () => reasons.length > before, 10_000);
  return [r.status, reasons[before]!];
}

describe("e2e: max_model_len from the pods' /v1/models", () => {
  it('is read into the index by the collector, and respected by the plugin without any config', async () => {
    expect(sys.pluginConfig).not.toHaveProperty('max_model_len');
    // The model's card as vLLM's (its LoRA adapters' cards follow, without a window).
    const models = (await (await fetch(`${sys.fleet.pods[0]!.base}/v1/models`)).json()) as {
      data: unknown[];
    };
    expect(models.data[0]).toMatchObject({ id: MODEL, parent: null, max_model_len: WINDOW });
    await waitFor(
      'every pod state carries its max_model_len',
      async () => (await sys.index.listPods(MODEL)).every((p) => p.maxModelLen === WINDOW),
      20_000,
    );

    const long = chat(`Summarize: ${'the tide rises and falls. '.repeat(200)}`);
    // Before the router has looked the model up: checked right after its first lookup. The pods refuse it
    // (vLLM's 400), and the plugin routed it on load all the same.
    expect(await send(long)).toEqual([400, 'context_window_exceeded']);
    expect(await send(chat('What is a KV cache?'))).toEqual([200, 'none']);
    // The window known: tokenization is cut at it, before any lookup.
    expect(await send(long)).toEqual([400, 'context_window_exceeded']);
  }, 120_000);
});
