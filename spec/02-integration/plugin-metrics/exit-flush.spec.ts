import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsPluginServerDef, type Gateway } from '../../../kong/stand-in/index.js';
import { pluginMetricsKey } from '../../../src/plugin-metrics/index.js';
import { startNamedUpstream, type TestServer } from '../kong/test-servers.js';
import {
  buildPlugin,
  CHAT_PATH,
  chatBody,
  LONG_SYSTEM_PROMPT,
  startPluginGateway,
  type BuiltPlugin,
} from '../plugin/harness.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';

/**
 * The real plugin server flushes its decision counts when Kong stops it (SIGTERM), not only on its timer: with
 * a flush interval far past the test, the counts are in Redis only after the stop.
 */

const PREFIX = 'kexit';

describe('decision metrics when Kong stops the plugin server', () => {
  let plugin: BuiltPlugin;
  let pod: TestServer;
  let redis: TestRedis;
  let gw: Gateway | null = null;
  let dir: string;

  beforeAll(async () => {
    [plugin, pod, redis] = await Promise.all([buildPlugin(), startNamedUpstream('pod'), startRedis()]);
    dir = mkdtempSync(join(tmpdir(), 'kinf-exit-flush-'));
    gw = await startPluginGateway(
      plugin,
      pod.url,
      {
        index: 'memory',
        redis_url: redis.url,
        redis_key_prefix: PREFIX,
        tokenizer: 'tiktoken:o200k_base',
        chat_template: 'chatml',
        // No pods in the (empty) index: routed on load to the static pod.
        model_pods: { 'test-model': [`127.0.0.1:${pod.port}`] },
      },
      {
        pluginServers: [
          jsPluginServerDef('kinference', plugin.dir, dir, {
            env: { KINFERENCE_METRICS_FLUSH_MS: '600000' },
          }),
        ],
      },
    );
  }, 90_000);
  afterAll(async () => {
    await gw?.close();
    await pod?.close();
    await redis?.stop();
    plugin?.cleanup();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('counts reach Redis at the stop, within the exit flush', async () => {
    for (let i = 0; i < 4; i++) {
      const r = await fetch(gw!.url + CHAT_PATH, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(chatBody(LONG_SYSTEM_PROMPT, `Question ${i}?`, { max_tokens: 8 })),
      });
      expect(r.status).toBe(200);
      await r.text();
    }
    await gw!.idle();
    // The 10-minute interval has not come: nothing written yet.
    expect(await redis.client.hlen(pluginMetricsKey(PREFIX))).toBe(0);
    await gw!.close(); // SIGTERM to the plugin server, which flushes and exits
    gw = null;
    const hash = await redis.client.hgetall(pluginMetricsKey(PREFIX));
    const field = JSON.stringify(['decisions', 'test-model', '(none)', 'load_only', 'no_pods_in_index']);
    expect(hash[field]).toBe('4');
    expect(Number(hash[JSON.stringify(['flushes'])])).toBe(1);
  }, 60_000);
});
