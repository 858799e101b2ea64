import { spawn, type ChildProcess, type ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDeclarative, packageRoot, processPluginConfig } from '../../../kong/stand-in/index.js';
import { toKongSchema } from '../../../src/config/to-kong-schema.js';
import { PluginConfigSchema } from '../../../src/config/plugin-config.js';
import { validateConfig } from '../../../src/config/validate.js';
import { freePort, waitFor } from '../../helpers/ports.js';
import { buildPlugin, kongConfigFor, type BuiltPlugin } from '../plugin/harness.js';
import { startNamedUpstream, type TestServer } from './test-servers.js';

/** `kinference gateway` as users run it: a kong.yaml file, a listen address, SIGTERM to stop. */

let plugin: BuiltPlugin;
let upstream: TestServer;
let dir: string;
let child: ChildProcess | null = null;

beforeAll(async () => {
  [plugin, upstream] = await Promise.all([buildPlugin(), startNamedUpstream('service')]);
  dir = mkdtempSync(join(packageRoot(), '.tmp', 'cli-'));
});

afterAll(async () => {
  if (child && child.exitCode === null) child.kill('SIGKILL');
  await upstream?.close();
  plugin?.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

/**
 * How long `kinference gateway` may take to start: tsx compiles the CLI from source and the plugin server
 * starts, most of a minute on a loaded machine. Not what these tests assert; their budget encloses it.
 */
const STARTUP_MS = 90_000;

/** Resolves on the gateway's "listening on" line; rejects, with its stderr, if it exits before. */
function listening(proc: ChildProcessByStdio<null, null, Readable>, stderr: () => string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onData = (): void => {
      if (!stderr().includes('listening on')) return;
      proc.off('exit', onExit);
      proc.stderr.off('data', onData);
      resolve();
    };
    const onExit = (code: number | null): void => {
      proc.stderr.off('data', onData);
      reject(new Error(`the gateway exited (${code}) before listening: ${stderr()}`));
    };
    proc.stderr.on('data', onData);
    proc.once('exit', onExit);
  });
}

/** `kinference gateway --kong-config <yaml> --listen 127.0.0.1:<port>` from source, stderr piped. */
function startGatewayCli(yamlPath: string, port: number): ChildProcessByStdio<null, null, Readable> {
  return spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'cli/main.ts',
      'gateway',
      '--kong-config',
      yamlPath,
      '--listen',
      `127.0.0.1:${port}`,
      '--plugins-dir',
      plugin.dir,
    ],
    { cwd: packageRoot(), stdio: ['ignore', 'ignore', 'pipe'] },
  );
}

describe('kinference gateway (CLI)', { timeout: STARTUP_MS + 30_000 }, () => {
  it('serves a kong.yaml through the plugin and stops cleanly on SIGTERM', async () => {
    const yamlPath = join(dir, 'kong.yaml');
    // index: memory, no pods known → the plugin leaves Kong's target: the service answers.
    writeFileSync(
      yamlPath,
      stringify(kongConfigFor(upstream.url, { index: 'memory', expose_headers: true })),
    );
    const port = await freePort();
    const proc = startGatewayCli(yamlPath, port);
    child = proc;
    let stderr = '';
    proc.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    await listening(proc, () => stderr);
    // The config's first requests are routed on load while its tokenizer loads (tokenizer_loading): ask
    // until the plugin routes with it, then it finds no pods.
    await waitFor(
      'a decision made with the tokenizer',
      async () => {
        const r = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
          method: 'POST',
          body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
        });
        expect(await r.json()).toMatchObject({ served_by: 'service' });
        return upstream.requests.at(-1)!.headers['x-kinference-fallback'] !== 'tokenizer_loading';
      },
      60_000,
    );
    expect(upstream.requests.at(-1)!.headers['x-kinference-fallback']).toBe('no_pods_in_index');
    const code = await new Promise<number | null>((resolve) => {
      proc.once('exit', (c) => resolve(c));
      proc.kill('SIGTERM');
    });
    expect(code).toBe(0);
    // A CLI start and a tokenizer load: tens of seconds under load, not what the test asserts.
  }, 90_000);

  it('fails with a clear message on a bad kong.yaml', async () => {
    const yamlPath = join(dir, 'bad.yaml');
    writeFileSync(yamlPath, '_format_version: "9.9"\n');
    const proc = spawn(
      process.execPath,
      ['--import', 'tsx', 'cli/main.ts', 'gateway', '--kong-config', yamlPath],
      {
        cwd: packageRoot(),
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    let stderr = '';
    proc.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const code = await new Promise<number | null>((resolve) => proc.once('exit', resolve));
    expect(code).toBe(2);
    expect(stderr).toMatch(/_format_version must be "3.0"/);
  });

  it('fails with a clear message, not a stack trace, when --listen is taken', async () => {
    const yamlPath = join(dir, 'busy.yaml');
    writeFileSync(yamlPath, stringify(kongConfigFor(upstream.url, { index: 'memory' })));
    const port = await freePort();
    const busy = createServer();
    await new Promise<void>((r) => busy.listen(port, '127.0.0.1', () => r()));
    try {
      const proc = startGatewayCli(yamlPath, port);
      let stderr = '';
      proc.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
      const code = await new Promise<number | null>((resolve) => proc.once('exit', resolve));
      expect(code).toBe(2);
      expect(stderr).toContain(`kinference: --listen 127.0.0.1:${port}: address already in use`);
      expect(stderr).not.toMatch(/\n\s+at /);
    } finally {
      await new Promise((r) => busy.close(r));
    }
  });

  it("accepts the repository's kong/kong.yaml: it parses, and its plugin config passes Kong's and our checks", () => {
    const cfg = loadDeclarative(join(packageRoot(), 'kong/kong.yaml'));
    const k = cfg.plugins.filter((p) => p.name === 'kinference');
    expect(k.length).toBeGreaterThan(0);
    for (const p of k) {
      const processed = processPluginConfig(toKongSchema(PluginConfigSchema), p.config);
      expect(processed.ok ? [] : processed.errors).toEqual([]);
      if (processed.ok)
        expect(() => validateConfig(PluginConfigSchema, processed.config, 'kong.yaml')).not.toThrow();
    }
  });
});
