import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot, startGateway, type Gateway } from '../../kong/stand-in/index.js';
import { startRedisServer, type RedisServer } from '../../harness/redis-server.js';
import { freePort, waitFor } from '../helpers/ports.js';
import {
  startNamedUpstream,
  startSink,
  type Sink,
  type TestServer,
} from '../02-integration/kong/test-servers.js';
import { buildPlugin, chatBody, type BuiltPlugin } from '../02-integration/plugin/harness.js';

/**
 * Secrets from redis_url (the password, an ACL user's password) never appear in what the plugin, the
 * collector, `kinference explain` or `kinference validate` print or export (logs, spans, errors, reports),
 * with a Redis that refuses them (wrong password, wrong ACL password, nothing listening, a host that does not
 * resolve) and with URLs a parser refuses (a port out of range, a raw / or @ in the password, not redis://).
 * docs/security.md.
 */

const SECRET = 'PwMarker9c4e';
const cliMain = join(packageRoot(), 'cli', 'main.ts');
/** A CLI run: tsx compiles the CLI, then it loads a tokenizer; a minute on a loaded machine. */
const CLI_MS = 60_000;

let redis: RedisServer;
let closedPort: number;
let dir: string;

/** `{redis}` and `{closed}` in a URL: the refusing Redis's host:port, and a port nothing listens on. */
const R = '{redis}';
function resolve(url: string): string {
  return url.replace(R, `127.0.0.1:${redis.port}`).replace('{closed}', String(closedPort));
}

/** Each redis_url under test: what it gets wrong, and the URL, its password containing SECRET. */
function urls(): [string, string][] {
  const r = R;
  return [
    ['wrong password', `redis://:${SECRET}@${r}/0`],
    ['ACL user, wrong password', `redis://kinf:${SECRET}@${r}/0`],
    ['percent-encoded password', `redis://kinf:${SECRET}%40%2F@${r}/0`],
    ['nothing listening', `redis://kinf:${SECRET}@127.0.0.1:{closed}/0`],
    ['a host that does not resolve', `redis://kinf:${SECRET}@kinference-no-such-host.invalid:6379/0`],
    ['port out of range', `redis://kinf:${SECRET}@127.0.0.1:99999/0`],
    ['raw @ in the password', `redis://kinf:${SECRET}@x@${r}/0`],
    ['raw / in the password', `redis://kinf:ab/${SECRET}@${r}/0`],
    ['not redis://', `http://kinf:${SECRET}@${r}/0`],
  ];
}

function fleetFile(url: string): string {
  const path = join(dir, `fleet-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(
    path,
    stringify({
      redis_url: url,
      models: { m: { tokenizer: 'tiktoken:o200k_base', chat_template: 'chatml' } },
      pods: [{ id: 'pod-a', model: 'm', address: '127.0.0.1:18001' }],
      collector: { listen: '127.0.0.1:0' },
    }),
  );
  return path;
}

function cli(args: string[]): string {
  const r = spawnSync(process.execPath, ['--import', 'tsx', cliMain, ...args], {
    cwd: packageRoot(),
    encoding: 'utf8',
    timeout: CLI_MS,
  });
  return `${r.stdout}\n${r.stderr}\n${String(r.error ?? '')}`;
}

beforeAll(async () => {
  redis = await startRedisServer();
  closedPort = await freePort();
  // AUTH required (another password), and an ACL user `kinf` whose password is not ours.
  const admin = new Redis(redis.url);
  await admin.config('SET', 'requirepass', 'the-real-password');
  await admin.auth('the-real-password');
  await admin.call('ACL', 'SETUSER', 'kinf', 'on', '>the-real-acl-password', '~*', '+@all');
  admin.disconnect();
  dir = mkdtempSync(join(packageRoot(), '.tmp', 'secrets-'));
});

afterAll(async () => {
  await redis?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A kong.yaml with one route per redis_url under test. */
function kongFile(all: string[]): string {
  const path = join(dir, 'kong.yaml');
  writeFileSync(
    path,
    stringify({
      _format_version: '3.0',
      services: [
        {
          name: 's',
          url: 'http://127.0.0.1:9',
          routes: all.map((url, i) => ({
            name: `r${i}`,
            paths: [`/r${i}/v1/chat/completions`],
            plugins: [{ name: 'kinference', config: { redis_url: url, model_pods: { m: ['127.0.0.1:1'] } } }],
          })),
        },
      ],
    }),
  );
  return path;
}

/** Explain runs one CLI each (~15 s idle): the URLs whose failure differs in kind. */
const EXPLAINED = new Set([
  'wrong password',
  'ACL user, wrong password',
  'nothing listening',
  'port out of range',
  'raw / in the password',
  'not redis://',
]);

describe('redis_url secrets in CLI output', { timeout: CLI_MS + 15_000 }, () => {
  it.each(urls().filter(([w]) => EXPLAINED.has(w)))('explain, %s', (_, template) => {
    const body = join(dir, 'body.json');
    writeFileSync(body, JSON.stringify(chatBody('You are terse.', 'hi', { model: 'm' })));
    const out = cli(['explain', '--config', fleetFile(resolve(template)), '--body', body]);
    expect(out).not.toContain(SECRET);
    expect(out).not.toMatch(/node:internal|^\s+at /m); // an error in words, not a crash
  });

  it('validate (text and --json), every URL in one fleet file each and in one kong.yaml', () => {
    const all = urls().map(([, t]) => resolve(t));
    const files = [...all.map(fleetFile), kongFile(all)];
    for (const args of [files, ['--json', ...files]]) {
      const out = cli(['validate', ...args]);
      expect(out).not.toContain(SECRET);
      expect(out).toContain('kong.yaml');
    }
  });
});

describe('redis_url secrets in the collector’s log', { timeout: CLI_MS + 15_000 }, () => {
  it.each(
    urls().filter(([w]) => ['wrong password', 'ACL user, wrong password', 'port out of range'].includes(w)),
  )('%s', async (_, template) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', cliMain, 'collector', '--config', fleetFile(resolve(template))],
      { cwd: packageRoot(), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (out += c.toString('utf8')));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    try {
      // Until it has said what is wrong with Redis (or exited on a config error).
      await waitFor(
        'the collector to report the Redis failure',
        () => child.exitCode !== null || /WRONGPASS|NOAUTH|not a URL|invalid/i.test(out),
        CLI_MS,
      ).catch((e: unknown) => {
        throw new Error(`${String(e)}; the collector printed: ${out.slice(0, 2000)}`);
      });
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await exited;
    }
    expect(out).not.toContain(SECRET);
    expect(out).toMatch(/WRONGPASS|NOAUTH|not a URL/i);
  });
});

/** Kong refuses a plugin config whose redis_url is not redis:// at load (the schema's pattern): not ours. */
const pluginUrls = () => urls().filter(([w]) => w !== 'not redis://');

describe('redis_url secrets in the plugin’s logs, spans and answers', () => {
  let plugin: BuiltPlugin;
  let gw: Gateway;
  let service: TestServer;
  let sink: Sink;
  const logLines: string[] = [];

  beforeAll(async () => {
    [plugin, service, sink] = await Promise.all([buildPlugin(), startNamedUpstream('service'), startSink()]);
    gw = await startGateway({
      kongConfig: {
        _format_version: '3.0',
        services: [
          {
            name: 'vllm',
            url: service.url,
            retries: 0,
            routes: pluginUrls().map(([, template], i) => ({
              name: `r${i}`,
              paths: [`/r${i}/v1/chat/completions`],
              strip_path: true,
              plugins: [
                {
                  name: 'kinference',
                  config: {
                    redis_url: resolve(template),
                    tokenizer: 'tiktoken:o200k_base',
                    chat_template: 'chatml',
                    // Routed on load when Redis refuses: to this pod (the service's server).
                    model_pods: { m: [`127.0.0.1:${service.port}`] },
                    otlp_endpoint: `${sink.url}/v1/traces`,
                    trace_sample_ratio: 1,
                    expose_headers: true,
                  },
                },
              ],
            })),
          },
        ],
      },
      port: 0,
      pluginsDir: plugin.dir,
      logger: (l, m) => logLines.push(`[${l}] ${m}`),
    });
  }, 60_000);

  afterAll(async () => {
    await gw?.close();
    await Promise.all([service?.close(), sink?.close()]);
    plugin?.cleanup();
  });

  it('every route answers (fail open), and nothing printed or exported holds the password', async () => {
    const n = pluginUrls().length;
    const answers: string[] = [];
    for (let round = 0; round < 2; round++)
      for (let i = 0; i < n; i++) {
        const r = await fetch(`${gw.url}/r${i}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(chatBody('You are terse.', 'hi', { model: 'm' })),
        });
        expect(r.status).toBe(200);
        answers.push(JSON.stringify([...r.headers]), await r.text());
      }
    await gw.idle();
    // The Redis failures were reported (so the check below looked at something), and spans were exported.
    await waitFor('the Redis failures logged', () => logLines.some((l) => /WRONGPASS|NOAUTH/.test(l)));
    await waitFor('spans exported', () => sink.bodies.length > 0);
    const everything = [
      ...logLines,
      JSON.stringify(sink.bodies),
      ...answers,
      ...service.requests.map((q) => JSON.stringify(q.headers)),
    ].join('\n');
    expect(everything).not.toContain(SECRET);
    expect(logLines.join('\n')).toMatch(/not a URL/);
  }, 60_000);
});
