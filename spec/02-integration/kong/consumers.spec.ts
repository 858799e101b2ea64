import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { startGateway, jsPluginServerDef, type Gateway } from '../../../kong/stand-in/index.js';
import { waitFor } from '../../helpers/ports.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';
import {
  startNamedUpstream,
  startSink,
  startSseUpstream,
  type Sink,
  type SseUpstream,
  type TestServer,
} from './test-servers.js';

/**
 * Consumers, key-auth, consumer groups, consumer/group-scoped plugins, kong.response.set_header and Kong's
 * rate-limiting, against the real stand-in with the real kong-js-pluginserver running a fixture plugin
 * (spec/fixtures/kong/plugins/whoami) and, for the redis policy, a real redis-server shared by two gateways.
 */

const WHOAMI_DIR = join(import.meta.dirname, '../../fixtures/kong/plugins/whoami');
const quiet = process.env.KINF_TEST_LOG
  ? (l: string, m: string) => process.stderr.write(`[${l}] ${m}\n`)
  : () => undefined;

let prefix: string;
let gw: Gateway;
let main: TestServer;
let sse: SseUpstream;
let sink: Sink;
let logPath: string;

beforeAll(async () => {
  [main, sse, sink] = await Promise.all([startNamedUpstream('main'), startSseUpstream('sse'), startSink()]);
  prefix = mkdtempSync(join(tmpdir(), 'kinf-consumers-'));
  logPath = join(prefix, 'access.log');
  gw = await startGateway({
    kongConfig: {
      _format_version: '3.0',
      consumers: [
        {
          username: 'alice',
          custom_id: 'a-1',
          tags: ['team-a'],
          keyauth_credentials: [{ key: 'alice-key' }],
          groups: [{ name: 'silver' }],
        },
        { username: 'bob', keyauth_credentials: [{ key: 'bob-key' }] },
        { custom_id: 'carol-only-custom', keyauth_credentials: [{ key: 'carol-key' }] },
        { username: 'anon' },
      ],
      consumer_groups: [{ name: 'gold', consumers: [{ username: 'alice' }] }, { name: 'silver' }],
      services: [
        {
          name: 'main',
          url: main.url,
          routes: [
            {
              name: 'auth',
              paths: ['/auth'],
              plugins: [
                { name: 'key-auth', config: { hide_credentials: true } },
                { name: 'whoami', config: { report_url: `${sink.url}/report` } },
              ],
            },
            {
              name: 'anon',
              paths: ['/anon'],
              plugins: [
                { name: 'key-auth', config: { anonymous: 'anon', key_names: ['x-api-key'] } },
                { name: 'whoami', config: {} },
              ],
            },
            {
              name: 'limited',
              paths: ['/limited'],
              plugins: [
                { name: 'key-auth', config: {} },
                { name: 'rate-limiting', config: { hour: 3, day: 100 } },
              ],
            },
            {
              name: 'exit',
              paths: ['/exit'],
              plugins: [{ name: 'whoami', config: { exit_status: 418 } }],
            },
          ],
        },
        {
          name: 'stream',
          url: `${sse.url}/v1`,
          routes: [{ name: 'sse', paths: ['/sse'], response_buffering: false }],
        },
      ],
      plugins: [
        // On the route, consumer+route beats route and group+route beats route: bob gets 1 an hour, alice
        // (gold, silver) 2. A consumer-only plugin would apply to bob on every route.
        { name: 'rate-limiting', route: 'limited', consumer: 'bob', config: { hour: 1 } },
        { name: 'rate-limiting', route: 'limited', consumer_group: 'gold', config: { hour: 2 } },
        { name: 'file-log', config: { path: logPath } },
      ],
    },
    port: 0,
    pluginServers: [jsPluginServerDef('whoami', WHOAMI_DIR, prefix)],
    logger: quiet,
  });
});

afterAll(async () => {
  await gw?.close();
  await Promise.all([main?.close(), sse?.close(), sink?.close()]);
  if (prefix) rmSync(prefix, { recursive: true, force: true });
});

/** The fields of a file-log line (kong.log.serialize()) these tests read. */
interface LogLine {
  request: { uri: string; size: number };
  response: { size: number };
  consumer?: { username?: string };
  authenticated_entity?: unknown;
}

function logLines(): LogLine[] {
  return readFileSync(logPath, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as LogLine);
}

describe('key-auth as Kong 3.9 answers', () => {
  it('401s with Kong’s exact body and WWW-Authenticate when no key, an empty key, a bad key or two keys come', async () => {
    const none = await fetch(`${gw.url}/auth`);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Key');
    expect(none.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const id = none.headers.get('x-kong-request-id');
    expect(await none.text()).toBe(
      `{\n  "message":"No API key found in request",\n  "request_id":"${id}"\n}`,
    );

    const empty = await fetch(`${gw.url}/auth?apikey=`);
    expect(((await empty.json()) as { message: string }).message).toBe('No API key found in request');
    const badKey = await fetch(`${gw.url}/auth`, { headers: { apikey: 'nope' } });
    expect(badKey.status).toBe(401);
    expect(((await badKey.json()) as { message: string }).message).toBe('Unauthorized');
    const twice = await fetch(`${gw.url}/auth?apikey=a&apikey=b`);
    expect(((await twice.json()) as { message: string }).message).toBe('Duplicate API key found');
    const html = await fetch(`${gw.url}/auth`, { headers: { accept: 'text/html' } });
    expect(html.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(main.requests).toHaveLength(0);
  });

  it('authenticates a header or query key, sends Kong’s X-Consumer-* headers and hides the credential', async () => {
    main.requests.length = 0;
    const byHeader = await fetch(`${gw.url}/auth?keep=1`, {
      headers: { APIKEY: 'alice-key', 'x-anonymous-consumer': 'forged' },
    });
    expect(byHeader.status).toBe(200);
    const up = main.requests[0]!;
    expect(up.headers['x-consumer-username']).toBe('alice');
    expect(up.headers['x-consumer-custom-id']).toBe('a-1');
    expect(up.headers['x-consumer-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(up.headers['x-credential-identifier']).toMatch(/^[0-9a-f-]{36}$/);
    expect(up.headers['x-anonymous-consumer']).toBeUndefined();
    expect(up.headers.apikey).toBeUndefined(); // hide_credentials
    expect(up.headers['x-consumer-groups']).toBeUndefined(); // the acl plugin's header, not key-auth's
    expect(up.headers['x-whoami-upstream']).toBe('alice');

    const byQuery = await fetch(`${gw.url}/auth?a=1&apikey=carol-key&b=2`);
    expect(byQuery.status).toBe(200);
    const up2 = main.requests[1]!;
    expect(up2.url).toBe('/?a=1&b=2'); // strip_path, the key taken out of the query
    expect(up2.headers['x-consumer-custom-id']).toBe('carol-only-custom');
    expect(up2.headers['x-consumer-username']).toBeUndefined();
  });

  it('falls back to the anonymous consumer and marks it, as the logical-OR flow does', async () => {
    main.requests.length = 0;
    const r = await fetch(`${gw.url}/anon`);
    expect(r.status).toBe(200);
    const up = main.requests[0]!;
    expect(up.headers['x-consumer-username']).toBe('anon');
    expect(up.headers['x-anonymous-consumer']).toBe('true');
    expect(up.headers['x-credential-identifier']).toBeUndefined();
    const who = JSON.parse(r.headers.get('x-whoami')!) as {
      consumer: { username: string };
      credential?: unknown;
    };
    expect(who.consumer.username).toBe('anon');
    expect(who.credential).toBeUndefined();
  });
});

describe('the PDK sees the consumer; response headers set in access reach the client', () => {
  it('get_consumer, get_consumer_groups (sorted by name) and get_credential as Kong serialises them', async () => {
    const r = await fetch(`${gw.url}/auth`, { headers: { apikey: 'alice-key' } });
    expect(r.status).toBe(200);
    const who = JSON.parse(r.headers.get('x-whoami')!) as {
      consumer: { id: string };
      groups: { name: string }[];
      credential: unknown;
    };
    expect(who.consumer).toEqual({
      id: expect.any(String),
      username: 'alice',
      custom_id: 'a-1',
      tags: ['team-a'],
      created_at: expect.any(Number),
      updated_at: expect.any(Number),
    });
    expect(who.groups.map((g: { name: string }) => g.name)).toEqual(['gold', 'silver']);
    expect(who.groups[0]).toMatchObject({ consumers_count: 1, id: expect.any(String) });
    expect(who.credential).toMatchObject({ key: 'alice-key', consumer: { id: who.consumer.id } });

    const bob = await fetch(`${gw.url}/auth`, { headers: { apikey: 'bob-key' } });
    expect(JSON.parse(bob.headers.get('x-whoami')!).groups).toBeUndefined(); // nil: in no group
  });

  it('set_header, add_header and set_headers go out with the proxied answer and with an exit', async () => {
    const r = await fetch(`${gw.url}/auth`, { headers: { apikey: 'bob-key' } });
    expect(r.headers.get('x-added')).toBe('one, two');
    expect(r.headers.get('x-set-a')).toBe('a');
    expect(r.headers.get('x-set-b')).toBe('b1, b2');
    expect(r.headers.get('content-type')).toBe('application/json'); // the upstream's
    const exit = await fetch(`${gw.url}/exit`);
    expect(exit.status).toBe(418);
    expect(exit.headers.get('x-added')).toBe('one, two');
    expect(JSON.parse(exit.headers.get('x-whoami')!).consumer).toBeUndefined();
  });

  it('serialize() carries the consumer and authenticated_entity; get_consumer works in the log timer', async () => {
    sink.bodies.length = 0;
    await fetch(`${gw.url}/auth`, { headers: { apikey: 'alice-key' } });
    await gw.idle();
    await waitFor('the log phase report', () => sink.bodies.length > 0);
    const rep = sink.bodies[0] as { serialized: LogLine; consumer: { username: string } };
    expect(rep.consumer.username).toBe('alice');
    expect(rep.serialized.consumer).toEqual(rep.consumer);
    expect(rep.serialized.consumer).not.toHaveProperty('keyauth_credentials');
    // Kong 3.9 reads credential.consumer_id, which a keyauth credential lacks: the id alone.
    expect(rep.serialized.authenticated_entity).toEqual({ id: expect.any(String) });
    const line = logLines().at(-1)!;
    expect(line.consumer?.username).toBe('alice');
  });
});

describe('rate-limiting (local policy) with consumer and consumer-group scoped configs', () => {
  it('counts per consumer, sends Kong’s headers, stops with 429, Retry-After and Kong’s body', async () => {
    // carol: the route's own config (3 an hour, 100 a day).
    const seen: Response[] = [];
    for (let i = 0; i < 4; i++) {
      seen.push(await fetch(`${gw.url}/limited`, { headers: { apikey: 'carol-key' } }));
      await new Promise((r) => setImmediate(r)); // the local increment runs in Kong's timer_at(0)
    }
    expect(seen.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    expect(seen.map((r) => r.headers.get('x-ratelimit-remaining-hour'))).toEqual(['2', '1', '0', '0']);
    expect(seen[0]!.headers.get('x-ratelimit-limit-hour')).toBe('3');
    expect(seen[0]!.headers.get('x-ratelimit-limit-day')).toBe('100');
    expect(seen[0]!.headers.get('x-ratelimit-remaining-day')).toBe('99');
    expect(seen[0]!.headers.get('ratelimit-limit')).toBe('3');
    expect(seen[0]!.headers.get('ratelimit-remaining')).toBe('2');
    const reset = Number(seen[0]!.headers.get('ratelimit-reset'));
    const sinceHour = Math.floor((Date.now() % 3_600_000) / 1000);
    expect(Math.abs(reset - (3600 - sinceHour))).toBeLessThanOrEqual(2);
    const stopped = seen[3]!;
    expect(stopped.headers.get('retry-after')).toBe(stopped.headers.get('ratelimit-reset'));
    const id = stopped.headers.get('x-kong-request-id');
    expect(await stopped.text()).toBe(`{\n  "message":"API rate limit exceeded",\n  "request_id":"${id}"\n}`);
  });

  it('a consumer-scoped config beats the route’s, and so does a consumer group’s', async () => {
    const statuses = async (key: string, n: number): Promise<number[]> => {
      const out: number[] = [];
      for (let i = 0; i < n; i++) {
        out.push((await fetch(`${gw.url}/limited`, { headers: { apikey: key } })).status);
        await new Promise((r) => setImmediate(r));
      }
      return out;
    };
    expect(await statuses('bob-key', 2)).toEqual([200, 429]);
    expect(await statuses('alice-key', 3)).toEqual([200, 200, 429]);
  });
});

describe('kong.log.serialize() sizes', () => {
  it('request.size and response.size are the bytes on the wire, headers included, for an SSE stream', async () => {
    const body = JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    const raw =
      `POST /sse/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
    const received = await new Promise<Buffer>((resolve, reject) => {
      const chunks: Buffer[] = [];
      const s = connect(gw.port, '127.0.0.1', () => s.write(raw));
      s.on('data', (c: Buffer) => chunks.push(c));
      s.on('end', () => resolve(Buffer.concat(chunks)));
      s.on('error', reject);
    });
    expect(received.toString('latin1')).toContain('data: [DONE]');
    await gw.idle();
    const line = logLines().find((l) => l.request.uri === '/sse/chat/completions')!;
    expect(line.request.size).toBe(Buffer.byteLength(raw));
    expect(line.response.size).toBe(received.length);
  });
});

describe('rate-limiting (redis policy) shared by two gateways, as Kong nodes share it', () => {
  let redis: TestRedis;
  const gws: Gateway[] = [];
  beforeAll(async () => {
    redis = await startRedis();
    const config = {
      _format_version: '3.0',
      services: [{ name: 's', url: main.url, routes: [{ name: 'r', paths: ['/r'] }] }],
      plugins: [
        {
          name: 'rate-limiting',
          config: {
            hour: 5,
            limit_by: 'header',
            header_name: 'x-tenant',
            policy: 'redis',
            redis: { host: '127.0.0.1', port: redis.port },
          },
        },
      ],
    };
    for (let i = 0; i < 2; i++)
      gws.push(await startGateway({ kongConfig: config, port: 0, pluginServers: [], logger: quiet }));
  });
  afterAll(async () => {
    await Promise.all(gws.map((g) => g.close()));
    await redis?.stop();
  });

  it('counts one window across both nodes under Kong’s key and refuses the sixth request', async () => {
    const tenant = `t-${process.pid}`;
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) {
      const r = await fetch(`${gws[i % 2]!.url}/r`, { headers: { 'x-tenant': tenant } });
      statuses.push(r.status);
      await r.arrayBuffer();
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
    const keys = await redis.client.keys(`ratelimit:*:${tenant}:*`);
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatch(
      new RegExp(`^ratelimit:0{8}-0{4}-0{4}-0{4}-0{12}:0{8}-0{4}-0{4}-0{4}-0{12}:${tenant}:\\d+000:hour$`),
    );
    // Realtime redis counts as it reads: refused requests are counted too, as in Kong.
    expect(await redis.client.get(keys[0]!)).toBe('7');
  });

  it('fails open with fault_tolerant (default) when Redis is gone: no headers, the request passes', async () => {
    redis.kill();
    const r = await fetch(`${gws[0]!.url}/r`, { headers: { 'x-tenant': 'other' } });
    expect(r.status).toBe(200);
    expect(r.headers.get('ratelimit-limit')).toBeNull();
  });
});

describe('examples/kong-tenants.yaml', () => {
  let redis: TestRedis;
  let example: Gateway;
  beforeAll(async () => {
    redis = await startRedis();
    // The example as written, pointed at this machine's upstream and Redis.
    const doc = parseYaml(
      readFileSync(join(import.meta.dirname, '../../../examples/kong-tenants.yaml'), 'utf8'),
    ) as {
      services: { url: string }[];
      plugins: { config: { redis: { host: string; port: number } } }[];
    };
    doc.services[0]!.url = main.url;
    for (const p of doc.plugins) p.config.redis = { host: '127.0.0.1', port: redis.port };
    // No plugin server here: kinference is skipped with a warning; key-auth and rate-limiting run.
    example = await startGateway({ kongConfig: doc, port: 0, pluginServers: [], logger: quiet });
  });
  afterAll(async () => {
    await example?.close();
    await redis?.stop();
  });

  it('loads, asks for a key, and limits each team by its group’s config', async () => {
    const chat = (key?: string): Promise<Response> =>
      fetch(`${example.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(key ? { 'x-api-key': key } : {}) },
        body: '{}',
      });
    expect((await chat()).status).toBe(401);
    const interactive = await chat('chat-team-example-key');
    expect(interactive.status).toBe(200);
    expect(interactive.headers.get('x-ratelimit-limit-minute')).toBe('600');
    const batch = await chat('eval-team-example-key');
    expect(batch.headers.get('x-ratelimit-limit-minute')).toBe('60');
    expect(batch.headers.get('x-ratelimit-limit-hour')).toBe('2000');
  });
});
