import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../kong/stand-in/index.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { startNamedUpstream, type TestServer } from '../02-integration/kong/test-servers.js';
import {
  buildPlugin,
  CHAT_PATH,
  chatBody,
  keysFor,
  LONG_SYSTEM_PROMPT,
  seedIndex,
  SEEDED_INDEX_CONFIG,
  startPluginGateway,
  type BuiltPlugin,
} from '../02-integration/plugin/harness.js';

/**
 * cache_salt through the whole request path (stand-in → real plugin server → router → Redis index): the index
 * is seeded with one tenant's salted prompt on pod-b; the same prompt under another salt, or unsalted, gets no
 * cached credit from it on any pod, while the same salt does. docs/security.md.
 */

const PREFIX = 'kinf-salt';
const MODEL = 'test-model';
const SALTS = ['tenant-a', 'tenant-b', 'tenant-a ', 'TENANT-A', 'tenant-ä'];
let redis: TestRedis;
let plugin: BuiltPlugin;
let gw: Gateway;
let fallback: TestServer;
const pods: Record<string, TestServer> = {};

const body = (salt: string | undefined) =>
  chatBody(LONG_SYSTEM_PROMPT, 'What does rule 7 say?', salt === undefined ? {} : { cache_salt: salt });

function config(): Record<string, unknown> {
  return {
    redis_url: redis.url,
    redis_key_prefix: PREFIX,
    tokenizer: 'tiktoken:o200k_base',
    chat_template: 'chatml',
    expose_headers: true,
    // Only pod-b holds blocks: any credit from them would pick pod-b and show in x-kinference-cached-tokens.
    ...SEEDED_INDEX_CONFIG,
  };
}

async function send(salt: string | undefined): Promise<{ pod: string; cached: number }> {
  const r = await fetch(`${gw.url}${CHAT_PATH}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body(salt)),
  });
  const served = ((await r.json()) as { served_by: string }).served_by;
  const h = (served === 'fallback' ? fallback : pods[served]!).requests.at(-1)!.headers;
  return { pod: served, cached: Number(h['x-kinference-cached-tokens']) };
}

beforeAll(async () => {
  [redis, plugin, fallback] = await Promise.all([
    startRedis(),
    buildPlugin(),
    startNamedUpstream('fallback'),
  ]);
  for (const id of ['pod-a', 'pod-b', 'pod-c']) pods[id] = await startNamedUpstream(id);
  const salted = await keysFor(config(), body('tenant-a'));
  await seedIndex(
    redis.url,
    PREFIX,
    MODEL,
    Object.entries(pods).map(([id, s]) => ({
      id,
      address: `127.0.0.1:${s.port}`,
      holds: id === 'pod-b' ? salted : [],
    })),
  );
  gw = await startPluginGateway(plugin, fallback.url, config());
  // The first lookup opens the Redis connection and may exceed redis_timeout_ms by design: warm up.
  await send(undefined);
});

afterAll(async () => {
  await gw?.close();
  await Promise.all([redis?.stop(), fallback?.close(), ...Object.values(pods).map((p) => p.close())]);
  plugin?.cleanup();
});

describe('cache_salt through the router with a seeded index', () => {
  it('the salt the index holds is credited on pod-b', async () => {
    const r = await send('tenant-a');
    expect(r.pod).toBe('pod-b');
    expect(r.cached).toBeGreaterThan(0);
  });

  it.each(SALTS.slice(1).map((s) => [JSON.stringify(s), s]))(
    'another salt (%s) gets no credit from it',
    async (_, salt) => {
      const r = await send(salt);
      expect(r.cached).toBe(0);
    },
  );

  it('no salt gets no credit from it either', async () => {
    expect((await send(undefined)).cached).toBe(0);
  });
});
