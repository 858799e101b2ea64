import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { L40S_27B_FP8 } from '../../emulator/profiles.js';
import { MODEL } from '../02-integration/emulator/emulator-fleet.js';
import { postChat, startFullSystem, type FullSystem } from '../helpers/full-system.js';
import { waitFor } from '../helpers/ports.js';

/**
 * The ITL guard's decode step, measured end to end: emulated pods (their vLLM /metrics over HTTP) → the
 * collector's scrapes → the pod records in Redis, which the plugin reads. Waves of 1 to 6 streams at once
 * through the gateway make the pods decode at several batch sizes; the line the collector fits must be the
 * emulator profile's, which nothing configured (the test fleet runs 20× faster, and shows times 20× shorter).
 */

let sys: FullSystem;
const SCALE = 20;

const stream = async (q: string): Promise<void> => {
  const r = await postChat(sys.gw.url, {
    model: MODEL,
    messages: [{ role: 'user', content: `${q} ${'explain the clause in detail. '.repeat(40)}` }],
    max_tokens: 300,
    stream: true,
  });
  expect(r.status).toBe(200);
  expect(await r.text()).toContain('data: [DONE]');
};

beforeAll(async () => {
  sys = await startFullSystem('kinf-e2e-decode');
}, 120_000);

afterAll(async () => {
  await sys?.close();
});

describe('e2e: decode steps measured from the pods /metrics', () => {
  it('writes every pod the emulated GPU’s decode line, fitted from waves of streams', async () => {
    const lines = async () => (await sys.index.listPods(MODEL)).map((p) => p.decodeSteps?.line ?? null);
    let wave = 0;
    await waitFor(
      'a decode line on every pod',
      async () => {
        const n = 1 + (wave % 6) * 3;
        await Promise.all(Array.from({ length: n }, (_, i) => stream(`wave ${wave} question ${i}`)));
        wave++;
        return (await lines()).every((l) => l !== null);
      },
      90_000,
    );
    const base = (L40S_27B_FP8.stepOverheadMs + L40S_27B_FP8.weightReadMs) / SCALE;
    const perToken = L40S_27B_FP8.kvReadMsPerToken / SCALE;
    for (const line of await lines()) {
      expect(line!.baseMs).toBeGreaterThan(base * 0.95);
      expect(line!.baseMs).toBeLessThan(base * 1.05);
      expect(line!.msPerContextToken).toBeGreaterThan(perToken * 0.85);
      expect(line!.msPerContextToken).toBeLessThan(perToken * 1.15);
    }
  }, 120_000);
});
