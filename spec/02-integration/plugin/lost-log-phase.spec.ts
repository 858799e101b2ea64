import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsPluginServerDef, type Gateway } from '../../../kong/stand-in/index.js';
import { waitFor } from '../../helpers/ports.js';
import { startNamedUpstream, type TestServer } from '../kong/test-servers.js';
import {
  buildPlugin,
  CHAT_PATH,
  chatBody,
  LONG_SYSTEM_PROMPT,
  startPluginGateway,
  type BuiltPlugin,
} from './harness.js';

/**
 * Issue #36 item 3: Kong skips the log phase when the worker that ran access dies. What the plugin keeps from
 * access to log (the pending decision, the router's reservation and ITL flight) must then be dropped after
 * its TTL, counted and reported — checked in the REAL plugin server's structures, read through its
 * KINFERENCE_DEBUG_STATE hook.
 */

// Long enough for six requests and a state dump on a loaded CI host (1.5 s expired one of them first there).
const TTL_MS = 5000;
const LOST = 6;

interface StateDump {
  seq: number;
  pending: { size: number; expired: number; evicted: number };
  routers: { reservations: number; flights: number; sharedReservations: number };
}

let plugin: BuiltPlugin;
let pod: TestServer;
let gw: Gateway;
let dir: string;
const logLines: string[] = [];
let dropLogs = true;

function pluginServerPid(): number {
  const pid = gw.plugins.get('kinference')?.server.pid;
  if (pid === undefined) throw new Error('no plugin server');
  return pid;
}

/** Asks the plugin server for a state dump and waits for it. */
async function dumpState(): Promise<StateDump> {
  const file = join(dir, 'state.json');
  const before = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as StateDump).seq : 0;
  process.kill(pluginServerPid(), 'SIGUSR2');
  let dump: StateDump | null = null;
  await waitFor('state dump', () => {
    if (!existsSync(file)) return false;
    const d = JSON.parse(readFileSync(file, 'utf8')) as StateDump;
    if (d.seq <= before) return false;
    dump = d;
    return true;
  });
  return dump!;
}

function send(): Promise<Response> {
  return fetch(gw.url + CHAT_PATH, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(chatBody(LONG_SYSTEM_PROMPT, 'What does rule 7 say?', { max_tokens: 16 })),
  });
}

beforeAll(async () => {
  [plugin, pod] = await Promise.all([buildPlugin(), startNamedUpstream('pod')]);
  dir = mkdtempSync(join(tmpdir(), 'kinf-lost-log-'));
  gw = await startPluginGateway(
    plugin,
    pod.url,
    {
      index: 'memory',
      tokenizer: 'tiktoken:o200k_base',
      chat_template: 'chatml',
      // No pods in the (empty) index: routed on load to the static pod, with a reservation and an ITL flight.
      model_pods: { 'test-model': [`127.0.0.1:${pod.port}`] },
      itl_slo_ms: 100,
      // Decisions on the event loop: two decision workers loading their tokenizers beside six requests slowed
      // them past a 1.5 s TTL on a loaded 2-core host; what this spec checks is the same either way.
      decision_workers: 0,
    },
    {
      pluginServers: [
        jsPluginServerDef('kinference', plugin.dir, dir, {
          env: { KINFERENCE_DEBUG_STATE: join(dir, 'state.json'), KINFERENCE_PENDING_TTL_MS: String(TTL_MS) },
        }),
      ],
      dropLogPhase: () => dropLogs,
      logger: (_l, m) => logLines.push(m),
    },
  );
}, 60_000);

afterAll(async () => {
  await gw?.close();
  await pod?.close();
  plugin?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('per-request state of requests whose log phase never comes', () => {
  it('is held until its TTL, then dropped, released, counted and reported', async () => {
    for (let i = 0; i < LOST; i++) expect((await send()).status).toBe(200);
    const held = await dumpState();
    expect(held.pending.size).toBe(LOST);
    expect(held.routers.reservations).toBe(LOST);
    expect(held.routers.flights).toBe(LOST);

    // No request comes to sweep: the plugin's own timer must.
    await waitFor('decisions expired', async () => (await dumpState()).pending.expired === LOST, 30_000);
    const after = await dumpState();
    expect(after.pending).toEqual({ size: 0, expired: LOST, evicted: 0 });
    expect(after.routers).toMatchObject({ reservations: 0, flights: 0, sharedReservations: 0 });

    // The report reaches Kong's log with the next log phase (one line per interval: the expiries after the
    // first line wait for the next interval's).
    dropLogs = false;
    expect((await send()).status).toBe(200);
    await gw.idle();
    await waitFor('drop report', () =>
      logLines.some((l) => /\d+ decisions dropped without their log phase .*their reservations/.test(l)),
    );
    const last = await dumpState();
    expect(last.pending.size).toBe(0);
    expect(last.routers).toMatchObject({ reservations: 0, flights: 0 });
  }, 60_000);
});
