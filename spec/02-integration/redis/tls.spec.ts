import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisTlsSettings, type PluginConfig } from '../../../src/config/plugin-config.js';
import { createKvIndex } from '../../../src/index/index.js';
import { createRouter, defaultResources, requestKeys } from '../../../src/router/index.js';
import { freePort, waitFor } from '../../helpers/ports.js';
import { qwen3RouterConfig } from '../../helpers/qwen3.js';
import { startTlsRedis, TLS_SERVERNAME, TLS_USER, type TlsRedis } from '../../helpers/redis-tls.js';

/**
 * A Redis as in-cluster and managed ones run: TLS only, its own CA, a certificate for a name that is not
 * the address, client certificates required, an ACL user (rediss://user:password@…). The plugin's router
 * connection and the collector's each work with the CA, client certificate, key and server name, and each
 * fails with a reason without them (the plugin open, the collector logging why).
 */

const MODEL = 'Qwen/Qwen3-8B';
const SYSTEM = 'You are a meticulous assistant for the ACME support desk. '.repeat(40);
const chat = (user: string): string =>
  JSON.stringify({
    model: MODEL,
    messages: [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: user },
    ],
  });

describe('Redis over TLS with its own CA, client certificates and an ACL user', () => {
  let redis: TlsRedis;
  let full: Record<string, string>;

  beforeAll(async () => {
    redis = await startTlsRedis();
    full = {
      redis_url: redis.url,
      redis_tls_ca_file: redis.caFile,
      redis_tls_cert_file: redis.certFile,
      redis_tls_key_file: redis.keyFile,
      redis_tls_servername: TLS_SERVERNAME,
    };
  }, 60_000);
  afterAll(async () => {
    await redis?.stop();
  });

  describe("the plugin's router connection", () => {
    const config = (over: Record<string, unknown>): PluginConfig =>
      qwen3RouterConfig({
        index: 'redis',
        redis_key_prefix: 'tls',
        redis_timeout_ms: 1000,
        model_pods: { [MODEL]: ['10.0.0.9:8000'] },
        ...over,
      });

    it('with the CA, certificate, key and server name: routes on the index, as the ACL user', async () => {
      const cfg = config(full);
      const res = defaultResources(cfg);
      const router = createRouter(cfg, res);
      try {
        // Keys first: loading the tokenizer on a busy machine must not age the pods' state past stale_after_ms.
        const keys = await requestKeys(cfg, chat('warm'));
        const now = Date.now();
        for (const [i, podId] of ['pod-a', 'pod-b'].entries())
          await res.index.upsertPodState(
            { model: MODEL, podId },
            { address: `10.0.0.${i + 1}:8000`, lastScrapeAtMs: now, lastEventAtMs: now },
          );
        await res.index.apply({ model: MODEL, podId: 'pod-b' }, [{ op: 'store', keys, tier: 'GPU' }]);
        const out = await router.route(chat('a question'));
        expect(out.fallbackReason).toBeNull();
        expect(out.target?.podId).toBe('pod-b');
        expect(out.decision.chosen?.cachedTokens).toBeGreaterThan(0);
      } finally {
        await router.close();
      }
      // The index's keys were written by the ACL user, through TLS only (the server has no plain port).
      const probe = createKvIndex({
        kind: 'redis',
        url: redis.url,
        keyPrefix: 'tls',
        tls: redisTlsSettings(full),
      });
      try {
        expect((await probe.listPods(MODEL)).map((p) => p.podId).sort()).toEqual(['pod-a', 'pod-b']);
      } finally {
        await probe.close();
      }
      expect(redis.url).toContain(`//${TLS_USER}:`);
      // The wrong password is refused: the ACL user is what lets the connection in.
      const wrong = config({ ...full, redis_url: redis.url.replace(/:[^:@]+@/, ':wrong@') });
      const refused = createRouter(wrong, defaultResources(wrong));
      try {
        const out = await refused.route(chat('a question'));
        expect(out.fallbackReason).not.toBeNull();
        expect(out.fallbackDetail).toMatch(/WRONGPASS/);
      } finally {
        await refused.close();
      }
    });

    const failing: [string, Record<string, unknown>, RegExp][] = [
      ['without the CA', { redis_tls_ca_file: undefined }, /self-signed certificate in certificate chain/],
      ['with another CA', { redis_tls_ca_file: 'OTHER' }, /self-signed certificate in certificate chain/],
      [
        'without the server name',
        { redis_tls_servername: undefined },
        /does not match certificate's altnames/,
      ],
      [
        'without a client certificate',
        { redis_tls_cert_file: undefined, redis_tls_key_file: undefined },
        /certificate required/,
      ],
      [
        'with a certificate of another CA',
        { redis_tls_cert_file: 'STRANGER', redis_tls_key_file: 'STRANGER_KEY' },
        /unknown ca/,
      ],
    ];
    it.each(failing)('%s: fails open, routing on the static pods, and says why', async (_, over, why) => {
      const o: Record<string, unknown> = { ...full, ...over };
      if (o.redis_tls_ca_file === 'OTHER') o.redis_tls_ca_file = redis.otherCaFile;
      if (o.redis_tls_cert_file === 'STRANGER') o.redis_tls_cert_file = redis.strangerCertFile;
      if (o.redis_tls_key_file === 'STRANGER_KEY') o.redis_tls_key_file = redis.strangerKeyFile;
      for (const k of Object.keys(o)) if (o[k] === undefined) delete o[k];
      const cfg = config(o);
      const router = createRouter(cfg, defaultResources(cfg));
      try {
        const out = await router.route(chat('a question'));
        expect(['index_error', 'index_timeout']).toContain(out.fallbackReason);
        expect(`${out.target?.host}:${out.target?.port}`).toBe('10.0.0.9:8000');
        expect(out.fallbackDetail ?? '').toMatch(why);
      } finally {
        await router.close();
      }
    });

    it('an unreadable file is an error naming its option', () => {
      const cfg = config({ ...full, redis_tls_ca_file: join(redis.dir, 'missing.crt') });
      expect(() => defaultResources(cfg)).toThrow(/redis_tls_ca_file: cannot read .*missing\.crt/);
    });
  });

  describe("the collector's connection (kinference collector, a real child process)", () => {
    let dir: string;
    const procs: ChildProcess[] = [];
    beforeAll(() => {
      dir = mkdtempSync(join(tmpdir(), 'kinf-collector-tls-'));
    });
    afterAll(async () => {
      for (const p of procs)
        if (p.exitCode === null && p.signalCode === null) {
          const exited = new Promise((r) => p.once('exit', r));
          p.kill('SIGKILL');
          await exited;
        }
      rmSync(dir, { recursive: true, force: true });
    });

    async function collector(name: string, tls: Record<string, string>) {
      const listen = `127.0.0.1:${await freePort()}`;
      const file = join(dir, `${name}.yaml`);
      writeFileSync(
        file,
        [
          ...Object.entries(tls).map(([k, v]) => `${k}: ${JSON.stringify(v)}`),
          'redis_key_prefix: tlscoll',
          'models:',
          `  ${MODEL}: { tokenizer: "tiktoken:o200k_base", chat_template: chatml, block_size: 16 }`,
          'pods:',
          '  - id: pod-a',
          `    model: ${MODEL}`,
          '    address: 127.0.0.1:18000',
          'collector:',
          `  listen: ${listen}`,
          '  log_level: info',
          '',
        ].join('\n'),
      );
      const p = spawn(process.execPath, ['--import', 'tsx', 'cli/main.ts', 'collector', '--config', file], {
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      procs.push(p);
      const out = { stderr: '', code: null as number | null, listen };
      p.stderr!.on('data', (d: Buffer) => (out.stderr += d.toString()));
      p.on('exit', (code) => (out.code = code));
      return out;
    }

    it('with the CA, certificate, key and server name: connects and takes the writer lease', async () => {
      const c = await collector('full', full);
      await waitFor(
        'the collector to be the active writer',
        async () => {
          const r = await fetch(`http://${c.listen}/healthz`).catch(() => null);
          return r?.status === 200;
        },
        30_000,
      );
      expect(c.stderr).toContain('writer lease acquired');
      expect(c.stderr).not.toMatch(/unreachable/);
    });

    it('without the CA: stays up, retrying, and logs why', async () => {
      const { redis_tls_ca_file: _, ...noCa } = full;
      const c = await collector('no-ca', noCa);
      await waitFor(
        'the collector to log that Redis is unreachable',
        () => /Redis unreachable/.test(c.stderr),
        30_000,
      );
      expect(c.stderr).toMatch(/self-signed certificate in certificate chain/);
      expect(c.code).toBeNull();
    });

    it('an unreadable key file: exit 2, naming the option', async () => {
      const c = await collector('bad-key', { ...full, redis_tls_key_file: join(dir, 'nope.key') });
      await waitFor('the collector to exit', () => c.code !== null, 30_000);
      expect(c.code).toBe(2);
      expect(c.stderr).toMatch(/redis_tls_key_file: cannot read .*nope\.key/);
    });
  });
});
