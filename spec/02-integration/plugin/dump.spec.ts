import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kongJsPluginServerBin, packageRoot } from '../../../kong/stand-in/index.js';
import { buildPlugin, type BuiltPlugin } from './harness.js';

/**
 * Kong's query command against the real bundle: `kong-js-pluginserver -d <dir> --dump-all-plugins` must print
 * one JSON document and nothing else, and exit on its own (a timer or socket opened at module load would
 * hang it, and Kong's startup with it). The golden is the generated schemas/kinference.kong-schema.json.
 */

let plugin: BuiltPlugin;
beforeAll(async () => {
  plugin = await buildPlugin();
});
afterAll(() => plugin?.cleanup());

function run(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [kongJsPluginServerBin(), ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    // A hang is the failure this test exists for: kill it and fail rather than wait for vitest's timeout.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`--dump-all-plugins did not exit by itself; stdout so far: ${stdout.slice(0, 200)}`));
    }, 20_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('the bundled plugin under kong-js-pluginserver --dump-all-plugins', () => {
  it('is one CommonJS file alone in its directory', () => {
    expect(readdirSync(plugin.dir)).toEqual(['kinference.js']);
    const src = readFileSync(join(plugin.dir, 'kinference.js'), 'utf8');
    expect(src).toMatch(/module\.exports/);
    expect(src).not.toMatch(/^\s*(import|export)\s/m);
  });

  it('prints exactly one valid JSON document describing the plugin, and exits 0 by itself', async () => {
    const { code, stdout, stderr } = await run(['-d', plugin.dir, '--dump-all-plugins']);
    expect(code).toBe(0);
    expect(stderr).toBe('');
    const dump = JSON.parse(stdout) as {
      Name: string;
      Version: string;
      Priority: number;
      Phases: string[];
      Schema: unknown;
    }[];
    expect(dump).toHaveLength(1);
    const [info] = dump;
    const pkg = JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string };
    expect(info!.Name).toBe('kinference');
    expect(info!.Version).toBe(pkg.version);
    expect(info!.Version).toMatch(/^\d+\.\d+\.\d+$/);
    expect(info!.Priority).toBe(780);
    expect(info!.Phases).toEqual(['log', 'access']); // never "response": it would buffer SSE
    const golden = JSON.parse(
      readFileSync(join(packageRoot(), 'schemas/kinference.kong-schema.json'), 'utf8'),
    ) as unknown;
    expect(info!.Schema).toEqual(golden);
  });
});
