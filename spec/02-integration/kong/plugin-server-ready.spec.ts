import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsPluginServerDef } from '../../../kong/stand-in/index.js';
import { packageRoot } from '../../../kong/stand-in/plugin-server-defs.js';
import { buildPlugin, type BuiltPlugin } from '../plugin/harness.js';
import { waitFor } from '../../helpers/ports.js';

const PROBE = join(packageRoot(), 'deploy', 'docker', 'plugin-server-ready.mjs');

/** The probe as compose and the Helm values run it: exit code and stderr. */
async function probe(...args: string[]): Promise<{ code: number; stderr: string }> {
  try {
    const r = await promisify(execFile)(process.execPath, [PROBE, ...args], { timeout: 10_000 });
    return { code: 0, stderr: r.stderr };
  } catch (e) {
    const err = e as { code?: number; stderr?: string };
    return { code: typeof err.code === 'number' ? err.code : -1, stderr: err.stderr ?? '' };
  }
}

// Kong starts the plugin server after nginx is up and waits for nothing: until the socket listens, a request
// whose config has no instance yet gets a 500. The container must not be ready before then.
describe('deploy/docker/plugin-server-ready.mjs: the Kong container readiness probe', () => {
  let plugin: BuiltPlugin;
  let tmp: string;
  let server: ChildProcess | null = null;
  let status: Server;
  let statusCode = 200;

  beforeAll(async () => {
    plugin = await buildPlugin();
    tmp = mkdtempSync(join(tmpdir(), 'kinf-ready-'));
    status = createServer((_req, res) => res.writeHead(statusCode).end());
    await new Promise<void>((r) => status.listen(0, '127.0.0.1', r));
  });
  afterAll(async () => {
    server?.kill();
    await new Promise((r) => status?.close(r));
    plugin?.cleanup();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it('is not ready until the real plugin server listens, then ready, and not ready once it is gone', async () => {
    const def = jsPluginServerDef('kinference', plugin.dir, tmp);
    const url = `http://127.0.0.1:${(status.address() as AddressInfo).port}/status/ready`;

    const before = await probe(def.socket);
    expect(before.code).toBe(1);
    expect(before.stderr).toMatch(/not ready: plugin server socket .*kinference\.sock: ENOENT/);

    // exec: the shell becomes the plugin server, so killing it kills the server.
    server = spawn('/bin/sh', ['-c', `exec ${def.startCmd!}`], { stdio: 'ignore' });
    await waitFor('the probe to pass', async () => (await probe(def.socket)).code === 0, 20_000, 100);
    expect((await probe(def.socket, url)).code).toBe(0);

    // Kong itself not ready (its status endpoint): not ready either.
    statusCode = 503;
    const kongNotReady = await probe(def.socket, url);
    expect(kongNotReady.code).toBe(1);
    expect(kongNotReady.stderr).toContain('answered 503');
    statusCode = 200;

    server.kill('SIGKILL');
    await waitFor('the probe to fail', async () => (await probe(def.socket)).code === 1, 10_000, 100);
    expect((await probe(def.socket)).stderr).toMatch(/ECONNREFUSED|ENOENT/);
  });

  it('refuses to run without a socket', async () => {
    const r = await probe();
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('usage:');
  });
});
