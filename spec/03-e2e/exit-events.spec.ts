import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface, type Interface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitPluginWarm } from '../helpers/plugin-warm-up.js';
import { jsPluginServerDef, startGateway, type Gateway } from '../../kong/stand-in/index.js';
import { waitFor } from '../helpers/ports.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { startNamedUpstream, type TestServer } from '../02-integration/kong/test-servers.js';
import {
  buildPlugin,
  chatBody,
  CHAT_PATH,
  kongConfigFor,
  LONG_SYSTEM_PROMPT,
  seedIndex,
  type BuiltPlugin,
  SEEDED_INDEX_CONFIG,
} from '../02-integration/plugin/harness.js';

/**
 * kong-pdk keeps an event until a Step answers "ret"; Kong never steps again after kong.response.exit, so
 * each 429 the plugin sheds used to stay in the plugin server for good (an audit counted 16,194 PipePairs
 * after 16,194 429s). The real Server/Listener of kong-pdk run in their own process with a probe that
 * reports how many events they hold; the stand-in drives them like Kong (exit answered, never stepped).
 */

const PREFIX = 'kinf-exit-events';
const MODEL = 'test-model';
const SHED = 60;
let redis: TestRedis;
let plugin: BuiltPlugin;
let service: TestServer;
let pod: TestServer;
let gw: Gateway;
let tmp: string;
let server: ChildProcessWithoutNullStreams;
let probeLines: Interface;

/** Asks the plugin server how many events it still holds. */
async function eventsHeld(): Promise<number> {
  const line = new Promise<string>((resolve) => probeLines.once('line', resolve));
  server.stdin.write('\n');
  const m = /^events (\d+)$/.exec(await line);
  if (!m) throw new Error('bad probe answer');
  return Number(m[1]);
}

beforeAll(async () => {
  [redis, plugin, service, pod] = await Promise.all([
    startRedis(),
    buildPlugin(),
    startNamedUpstream('service'),
    startNamedUpstream('pod-a'),
  ]);
  // A queue on the only pod (~3.3 s of prefill) puts every request over a 1 s TTFT SLO: each one is shed.
  await seedIndex(redis.url, PREFIX, MODEL, [
    { id: 'pod-a', address: `127.0.0.1:${pod.port}`, state: { waiting: 10, meanQueuedPrefillTokens: 1000 } },
  ]);
  tmp = mkdtempSync(join(tmpdir(), 'kinf-exit-'));
  const socket = join(tmp, 'kinference.sock');
  const script = fileURLToPath(new URL('./helpers/event-counting-pluginserver.mjs', import.meta.url));
  server = spawn(process.execPath, [script, plugin.dir, socket], { stdio: ['pipe', 'pipe', 'pipe'] });
  probeLines = createInterface({ input: server.stdout });
  await waitFor('plugin server socket', () => existsSync(socket));
  const pluginConfig = {
    redis_url: redis.url,
    redis_key_prefix: PREFIX,
    // Generous: a lookup timing out on a loaded machine is routed, not shed, and this test is about events.
    redis_timeout_ms: 2000,
    tokenizer: 'tiktoken:o200k_base',
    chat_template: 'chatml',
    shed_ttft_slo_ms: 1000,
    // The index is seeded once and the tokenizer load comes after: no collector keeps it fresh.
    ...SEEDED_INDEX_CONFIG,
  };
  gw = await startGateway({
    kongConfig: kongConfigFor(service.url, pluginConfig),
    port: 0,
    // Kong's "assuming external process management": no start command, connect to our server's socket.
    pluginServers: [{ ...jsPluginServerDef('kinference', plugin.dir, tmp), socket, startCmd: null }],
    logger: process.env.KINF_TEST_LOG ? (l, m) => process.stderr.write(`[${l}] ${m}\n`) : () => undefined,
  });
  // Until the tokenizer is loaded requests are routed on load (tokenizer_loading), not shed.
  await waitPluginWarm(gw, pluginConfig);
});

afterAll(async () => {
  await gw?.close();
  server?.stdin.end();
  server?.kill();
  await Promise.all([redis?.stop(), service?.close(), pod?.close()]);
  plugin?.cleanup();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('e2e: shedding leaves no event behind in the plugin server', () => {
  it(`${SHED} requests answered 429 leave 0 events (kong-pdk alone would keep ${SHED})`, async () => {
    const body = JSON.stringify(chatBody(LONG_SYSTEM_PROMPT, 'What does rule 7 say?'));
    let shed = 0;
    for (let i = 0; i < SHED; i++) {
      const r = await fetch(`${gw.url}${CHAT_PATH}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      await r.arrayBuffer();
      if (r.status === 429) shed++;
    }
    await gw.idle();
    expect(shed).toBeGreaterThanOrEqual(SHED - 1); // the very first lookup may still be connecting
    expect(await eventsHeld()).toBe(0);
  });
});
