import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { nginxWorkerEnv } from '../../../kong/stand-in/nginx-env.js';
import { PluginServerProcess } from '../../../kong/stand-in/plugin-server.js';
import { waitFor } from '../../helpers/ports.js';

const dir = mkdtempSync(join(tmpdir(), 'kinf-psenv-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('nginxWorkerEnv: what nginx leaves the plugin server Kong spawns', () => {
  const host = {
    TZ: 'Europe/Paris',
    PATH: '/usr/bin',
    NODE_PATH: '/x',
    VLLM_SYSTEM_START_DATE: '2025-08-05',
    KINFERENCE_KEEP_BUFFER_JSON: '1',
  };

  it('keeps TZ only, unless an env directive declares more', () => {
    expect(nginxWorkerEnv(host)).toEqual({ TZ: 'Europe/Paris' });
    expect(nginxWorkerEnv({ PATH: '/usr/bin' })).toEqual({});
  });

  it('passes what KONG_NGINX_MAIN_ENV declares: one name, several ("A; env B"), or a value', () => {
    expect(nginxWorkerEnv({ ...host, KONG_NGINX_MAIN_ENV: 'VLLM_SYSTEM_START_DATE' })).toEqual({
      TZ: 'Europe/Paris',
      VLLM_SYSTEM_START_DATE: '2025-08-05',
    });
    expect(
      nginxWorkerEnv({
        ...host,
        KONG_NGINX_MAIN_ENV: 'VLLM_SYSTEM_START_DATE; env KINFERENCE_KEEP_BUFFER_JSON; env UNSET_ONE',
      }),
    ).toEqual({ TZ: 'Europe/Paris', VLLM_SYSTEM_START_DATE: '2025-08-05', KINFERENCE_KEEP_BUFFER_JSON: '1' });
    expect(nginxWorkerEnv({ KONG_NGINX_MAIN_ENV: 'VLLM_SYSTEM_START_DATE=2024-01-02' })).toEqual({
      VLLM_SYSTEM_START_DATE: '2024-01-02',
    });
  });
});

describe('the stand-in spawns the start command with that environment, as Kong does', () => {
  async function spawnedEnv(name: string): Promise<Record<string, string>> {
    const file = join(dir, `${name}.env`);
    const proc = new PluginServerProcess(
      {
        name,
        socket: join(dir, `${name}.sock`),
        // A "plugin server" that writes the environment it got, then waits to be stopped.
        startCmd: `${process.execPath} -e "require('fs').writeFileSync('${file}', JSON.stringify(process.env)); setInterval(() => {}, 1000)"`,
        queryCmd: 'true',
      },
      () => undefined,
    );
    proc.start();
    try {
      await waitFor('the environment written', () => existsSync(file) && readFileSync(file, 'utf8') !== '');
      return JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>;
    } finally {
      await proc.stop();
    }
  }

  it('without KONG_NGINX_MAIN_ENV the plugin server does not see a variable set on Kong', async () => {
    const saved = { ...process.env };
    try {
      process.env.VLLM_SYSTEM_START_DATE = '2025-08-05';
      delete process.env.KONG_NGINX_MAIN_ENV;
      const env = await spawnedEnv('plain');
      expect(env.VLLM_SYSTEM_START_DATE).toBeUndefined();
      expect(env.HOME).toBeUndefined();
      process.env.KONG_NGINX_MAIN_ENV = 'VLLM_SYSTEM_START_DATE';
      expect((await spawnedEnv('declared')).VLLM_SYSTEM_START_DATE).toBe('2025-08-05');
    } finally {
      process.env = saved;
    }
  });
});
