import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { jsPluginServerDef, startGateway, type Gateway } from '../../kong/stand-in/index.js';
import { freePort, waitFor } from '../helpers/ports.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { startNamedUpstream, type TestServer } from '../02-integration/kong/test-servers.js';
import {
  buildPlugin,
  CHAT_PATH,
  chatBody,
  kongConfigFor,
  seedIndex,
  type BuiltPlugin,
} from '../02-integration/plugin/harness.js';

const MODEL = 'test-model';
const cli = fileURLToPath(new URL('../../bin/kinference.js', import.meta.url));

/**
 * An operator edits the plugin's config (decK sync, Admin API, `kong reload`): Kong rebuilds its plugins
 * with a new `__seq__`, starts a new plugin instance with the new config on the next request, and closes the
 * old one. Here the edit moves the plugin to another index (key prefix) whose only pod is another upstream.
 */
describe('e2e: a plugin config edited while Kong runs takes effect on the next request', () => {
  let redis: TestRedis;
  let plugin: BuiltPlugin;
  let service: TestServer;
  let podA: TestServer;
  let podB: TestServer;
  let tmp: string;

  beforeAll(async () => {
    [redis, plugin, service, podA, podB] = await Promise.all([
      startRedis(),
      buildPlugin(),
      startNamedUpstream('service'),
      startNamedUpstream('pod-a'),
      startNamedUpstream('pod-b'),
    ]);
    await seedIndex(redis.url, 'reload-a', MODEL, [{ id: 'pod-a', address: `127.0.0.1:${podA.port}` }]);
    await seedIndex(redis.url, 'reload-b', MODEL, [{ id: 'pod-b', address: `127.0.0.1:${podB.port}` }]);
    tmp = mkdtempSync(join(tmpdir(), 'kinf-reload-'));
  });
  afterAll(async () => {
    await Promise.all([redis?.stop(), service?.close(), podA?.close(), podB?.close()]);
    plugin?.cleanup();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  const pluginConfig = (prefix: string): Record<string, unknown> => ({
    redis_url: redis.url,
    redis_key_prefix: prefix,
    tokenizer: 'tiktoken:o200k_base',
    chat_template: 'chatml',
  });

  async function servedBy(url: string): Promise<string> {
    const r = await fetch(`${url}${CHAT_PATH}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(chatBody('You are terse.', 'Hello?')),
    });
    expect(r.status).toBe(200);
    return ((await r.json()) as { served_by: string }).served_by;
  }

  it('Gateway.reload: the new config routes the next request; a bad config is refused and the old one stays', async () => {
    let gw: Gateway | null = null;
    try {
      gw = await startGateway({
        kongConfig: kongConfigFor(service.url, pluginConfig('reload-a')),
        port: 0,
        pluginServers: [jsPluginServerDef('kinference', plugin.dir, tmp)],
        logger: () => undefined,
      });
      expect(await servedBy(gw.url)).toBe('pod-a');
      gw.reload(kongConfigFor(service.url, pluginConfig('reload-b')));
      expect(await servedBy(gw.url)).toBe('pod-b');
      const bad = { ...pluginConfig('reload-a'), redis_key_prefix: 'not a prefix!' };
      expect(() => gw!.reload(kongConfigFor(service.url, bad))).toThrow(/redis_key_prefix/);
      expect(await servedBy(gw.url)).toBe('pod-b');
      // Reloaded with its old config: a new instance again, the router it had (same fields) still there.
      gw.reload(kongConfigFor(service.url, pluginConfig('reload-a')));
      expect(await servedBy(gw.url)).toBe('pod-a');
    } finally {
      await gw?.close();
    }
  });

  it('kinference gateway: SIGHUP reloads the file; a file that does not load leaves the old config', async () => {
    const file = join(tmp, 'kong.yaml');
    const write = (prefix: string): void =>
      writeFileSync(file, stringify(kongConfigFor(service.url, pluginConfig(prefix))));
    write('reload-a');
    const port = await freePort();
    const child = spawn(
      process.execPath,
      [cli, 'gateway', '--kong-config', file, '--listen', `127.0.0.1:${port}`, '--plugins-dir', plugin.dir],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
    const url = `http://127.0.0.1:${port}`;
    try {
      await waitFor('the gateway', () => stderr.includes('listening on'), 60_000);
      expect(await servedBy(url)).toBe('pod-a');
      write('reload-b');
      child.kill('SIGHUP');
      await waitFor('pod-b after the reload', async () => (await servedBy(url)) === 'pod-b', 10_000, 100);
      writeFileSync(file, '_format_version: "3.0"\nservices: [ {');
      child.kill('SIGHUP');
      await waitFor('the refusal', () => stderr.includes('not reloaded, the previous configuration stays'));
      await new Promise((r) => setTimeout(r, 100)); // the rest of the line, if any
      const refusal = stderr.slice(stderr.indexOf('kinference gateway: ' + file + ' not reloaded'));
      expect(refusal.trimEnd().split('\n')).toHaveLength(1); // one line, the YAML excerpt included
      expect(await servedBy(url)).toBe('pod-b');
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
    // A CLI gateway start (tsx, the plugin server, its tokenizer load): tens of seconds under load; the
    // waits inside name what hangs.
  }, 90_000);
});
