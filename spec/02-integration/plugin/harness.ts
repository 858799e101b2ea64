import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { bundlePlugin } from '../../../scripts/bundle-plugin.mjs';
import { PluginConfigSchema } from '../../../src/config/plugin-config.js';
import { validateConfig } from '../../../src/config/validate.js';
import type { BlockKey, PodState } from '../../../src/core/types.js';
import { requestKeys } from '../../../src/router/index.js';
import { waitPluginWarm } from '../../helpers/plugin-warm-up.js';
import {
  packageRoot,
  startGateway,
  type Gateway,
  type GatewayOptions,
} from '../../../kong/stand-in/index.js';
import { observerIndex } from '../../helpers/observer-index.js';

export { SEEDED_INDEX_CONFIG } from '../../helpers/seeded-index.js';

/**
 * Shared set-up for plugin, telemetry and e2e specs: the REAL bundle (built into a temp dir, like `npm run
 * build` does), served by the real kong-js-pluginserver behind the stand-in, with the index in real Redis.
 */

export interface BuiltPlugin {
  dir: string;
  cleanup(): void;
}

/**
 * Bundles into <repo>/.tmp/… (gitignored): the bundle require()s its runtime externals (tokenizers, tiktoken)
 * from node_modules, which Node finds by walking up from the plugin file — as a Kong image must arrange too.
 */
export async function buildPlugin(): Promise<BuiltPlugin> {
  const tmp = join(packageRoot(), '.tmp');
  mkdirSync(tmp, { recursive: true });
  const root = mkdtempSync(join(tmp, 'plugin-'));
  const dir = await bundlePlugin(join(root, 'plugins'));
  return { dir, cleanup: () => rmSync(root, { recursive: true, force: true }) };
}

export const CHAT_PATH = '/v1/chat/completions';

/** A kong.yaml-shaped config: one service (the fallback url), one chat route with the plugin on it. */
export function kongConfigFor(
  serviceUrl: string,
  pluginConfig: Record<string, unknown>,
): Record<string, unknown> {
  return {
    _format_version: '3.0',
    services: [
      {
        name: 'vllm',
        url: serviceUrl,
        retries: 0,
        read_timeout: 600000,
        routes: [
          {
            name: 'chat',
            paths: [CHAT_PATH],
            methods: ['POST'],
            strip_path: false,
            response_buffering: false,
            plugins: [{ name: 'kinference', config: pluginConfig }],
          },
        ],
      },
    ],
  };
}

/**
 * The stand-in with the plugin on one chat route; resolves once the config's tokenizer and template are
 * loaded in the plugin server (waitPluginWarm), so the spec's first request is routed with them.
 */
export async function startPluginGateway(
  plugin: BuiltPlugin,
  serviceUrl: string,
  pluginConfig: Record<string, unknown>,
  extra: Partial<GatewayOptions> = {},
): Promise<Gateway> {
  const gw = await startGateway({
    kongConfig: kongConfigFor(serviceUrl, pluginConfig),
    port: 0,
    pluginsDir: plugin.dir,
    logger: process.env.KINF_TEST_LOG ? (l, m) => process.stderr.write(`[${l}] ${m}\n`) : () => undefined,
    ...extra,
  });
  try {
    await waitPluginWarm(gw, pluginConfig);
  } catch (e) {
    await gw.close();
    throw e;
  }
  return gw;
}

/** The block keys the router computes for `body` under `config` (src/router/request-keys.ts). */
export function keysFor(rawConfig: Record<string, unknown>, body: unknown): Promise<BlockKey[]> {
  return requestKeys(validateConfig(PluginConfigSchema, rawConfig, 'test config'), JSON.stringify(body));
}

export interface SeedPod {
  id: string;
  address: string;
  /** Keys this pod holds in GPU memory. */
  holds?: readonly BlockKey[];
  state?: Partial<Omit<PodState, 'podId' | 'model'>>;
}

/**
 * Registers pods (fresh as of now, healthy, idle) for `model` in the Redis index and stores their blocks.
 * Route with SEEDED_INDEX_CONFIG: the seeded timestamps are not refreshed.
 */
export async function seedIndex(
  redisUrl: string,
  keyPrefix: string,
  model: string,
  pods: SeedPod[],
): Promise<void> {
  const index = observerIndex({ kind: 'redis', url: redisUrl, keyPrefix });
  try {
    const now = Date.now();
    for (const p of pods) {
      const ref = { model, podId: p.id };
      await index.upsertPodState(ref, {
        address: p.address,
        healthy: true,
        running: 0,
        waiting: 0,
        lastEventAtMs: now,
        lastScrapeAtMs: now,
        ...p.state,
      });
      if (p.holds && p.holds.length > 0)
        await index.apply(ref, [{ op: 'store', keys: [...p.holds], tier: 'GPU' }]);
    }
  } finally {
    await index.close();
  }
}

/** A chat body whose long shared system prompt spans many blocks. */
export function chatBody(
  systemPrompt: string,
  user: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    model: 'test-model',
    messages: [
      { role: 'system', content: systemPrompt },
      { role: 'user', content: user },
    ],
    ...extra,
  };
}

export const LONG_SYSTEM_PROMPT = Array.from(
  { length: 60 },
  (_, i) => `Rule ${i + 1}: answer precisely, cite the section, and keep the tone of a careful reviewer.`,
).join(' ');
