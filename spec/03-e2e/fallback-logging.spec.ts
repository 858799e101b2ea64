import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../kong/stand-in/index.js';
import { freePort, waitFor } from '../helpers/ports.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { startNamedUpstream, type TestServer } from '../02-integration/kong/test-servers.js';
import {
  buildPlugin,
  chatBody,
  LONG_SYSTEM_PROMPT,
  seedIndex,
  startPluginGateway,
  type BuiltPlugin,
} from '../02-integration/plugin/harness.js';

/**
 * Misconfigurations the audit found silent (tracing off, expose_headers off): every request fell back and
 * nothing said why. Each now reaches Kong's error.log at warn — the level Kong's default `log_level =
 * notice` shows — once per reason with its detail, never the prompt.
 */

let redis: TestRedis;
let plugin: BuiltPlugin;
let service: TestServer;
let deadPort: number;
const gateways: Gateway[] = [];
const body = JSON.stringify(chatBody(LONG_SYSTEM_PROMPT, 'What does rule 7 say? secret-question-42'));

/** A gateway whose log keeps what Kong's default level shows (notice and above). */
async function gatewayWith(config: Record<string, unknown>): Promise<{ gw: Gateway; lines: string[] }> {
  const lines: string[] = [];
  const gw = await startPluginGateway(
    plugin,
    service.url,
    { redis_url: redis.url, redis_key_prefix: 'kinf-flog', ...config },
    {
      logger: (level, m) => {
        if (level !== 'debug' && level !== 'info') lines.push(`[${level}] ${m}`);
        if (process.env.KINF_TEST_LOG) process.stderr.write(`[${level}] ${m}\n`);
      },
    },
  );
  gateways.push(gw);
  return { gw, lines };
}

async function send(gw: Gateway, n = 3): Promise<void> {
  for (let i = 0; i < n; i++) {
    const r = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    expect(r.status).toBe(200); // fail open: the service url answers
    await r.arrayBuffer();
  }
  await gw.idle();
}

beforeAll(async () => {
  [redis, plugin, service, deadPort] = await Promise.all([
    startRedis(),
    buildPlugin(),
    startNamedUpstream('service'),
    freePort(),
  ]);
});

afterAll(async () => {
  await Promise.all(gateways.map((g) => g.close()));
  await Promise.all([redis?.stop(), service?.close()]);
  plugin?.cleanup();
});

function only(lines: string[], re: RegExp): string {
  const hits = lines.filter((l) => re.test(l));
  expect(hits, lines.join('\n')).toHaveLength(1);
  expect(hits[0]).not.toContain('secret-question-42');
  return hits[0]!;
}

describe('e2e: fallbacks are logged (rate-limited, at warn)', () => {
  it('a tokenizer typo: one warn line naming the spec, not one per request', async () => {
    const { gw, lines } = await gatewayWith({ tokenizer: 'tiktoken:o200k_harmny', chat_template: 'chatml' });
    await send(gw);
    const line = only(lines, /fallback tokenizer_error/);
    expect(line).toMatch(/^\[warn\] \[kinference\] /);
    expect(line).toContain('o200k_harmny');
  });

  it('a chat template that does not exist', async () => {
    const { gw, lines } = await gatewayWith({ chat_template: 'hf:/nonexistent/tokenizer_config.json' });
    await send(gw);
    expect(only(lines, /fallback template_error/)).toContain('/nonexistent/tokenizer_config.json');
  });

  it('Redis unreachable', async () => {
    const { gw, lines } = await gatewayWith({
      redis_url: `redis://127.0.0.1:${deadPort}/0`,
      tokenizer: 'tiktoken:o200k_base',
      chat_template: 'chatml',
    });
    await send(gw);
    only(lines, /fallback index_(error|timeout)/);
  });

  it('redis_cluster_nodes without redis_cluster: the plugin disables itself for that config and says why, once', async () => {
    const { gw, lines } = await gatewayWith({
      redis_cluster_nodes: ['127.0.0.1:7001'],
      tokenizer: 'tiktoken:o200k_base',
      chat_template: 'chatml',
    });
    await send(gw);
    const line = only(lines, /plugin disabled for this config/);
    expect(line).toMatch(/^\[warn\] \[kinference\] /);
    expect(line).toContain('redis_cluster_nodes: set, but redis_cluster is not');
  });

  it('an otlp_endpoint the exporter cannot parse: tracing off, said once, and requests are still routed', async () => {
    const pod = await startNamedUpstream('pod-a');
    try {
      await seedIndex(redis.url, 'kinf-flog-otlp', 'test-model', [
        { id: 'pod-a', address: `127.0.0.1:${pod.port}` },
      ]);
      const { gw, lines } = await gatewayWith({
        redis_key_prefix: 'kinf-flog-otlp',
        tokenizer: 'tiktoken:o200k_base',
        chat_template: 'chatml',
        otlp_endpoint: 'http://:4318/v1/traces', // a template with an empty host
      });
      for (let i = 0; i < 3; i++) {
        const r = await fetch(`${gw.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
        });
        expect(((await r.json()) as { served_by: string }).served_by).toBe('pod-a');
      }
      await gw.idle();
      expect(only(lines, /tracing off for this config/)).toContain('otlp_endpoint http://:4318/v1/traces');
      expect(lines.filter((l) => /access phase failed|log phase failed/.test(l))).toEqual([]);
    } finally {
      await pod.close();
    }
  });

  it('a dead otlp_endpoint: the failed export is logged', async () => {
    const { gw, lines } = await gatewayWith({
      tokenizer: 'tiktoken:o200k_base',
      chat_template: 'chatml',
      otlp_endpoint: `http://127.0.0.1:${deadPort}/v1/traces`,
    });
    await send(gw, 1);
    // The export runs after the batch delay (and the exporter's retries); the next log phase reports it.
    await waitFor(
      'export failure logged',
      async () => {
        await send(gw, 1);
        return lines.some((l) => l.includes('span export failed'));
      },
      30_000,
      250,
    );
    expect(only(lines, /span export failed/)).toContain(`127.0.0.1:${deadPort}`);
  }, 40_000);
});
