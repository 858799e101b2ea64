// Waits until a plugin config routes with its tokenizer (not tokenizer_loading): specs, benches, live stack.
import type { EventResult } from '../kong/stand-in/bridge.js';
import type { Gateway } from '../kong/stand-in/index.js';
import { entityId } from '../kong/stand-in/declarative.js';
import { StandInPdk } from '../kong/stand-in/pdk.js';
import { chatRequestContext, chatRoute } from './chat-route.js';
import { waitFor } from './wait-for.js';

/** The fallback a plugin instance gives while its tokenizer or chat template loads in the background. */
export const TOKENIZER_LOADING = 'tokenizer_loading';

/** The headers the access phase set on the upstream request (x-kinference-* with expose_headers). */
export function upstreamHeadersOf(r: EventResult): Record<string, string> | undefined {
  return r.steps.find((x) => x.method === 'kong.service.request.set_headers')?.args[0] as
    Record<string, string> | undefined;
}

/**
 * Kong starts a plugin instance on its config's first request, and until the config's tokenizer and chat
 * template are loaded (in the background) requests are routed on load alone (`tokenizer_loading`). Sends
 * `probe` (one request with expose_headers on; it answers the request's `x-kinference-fallback`, or anything
 * else when it failed open) until the fallback is no longer `tokenizer_loading` (a bad tokenizer ends it too,
 * with its own reason). The load has no event to wait on: this polls, every `intervalMs`.
 */
export async function untilRoutesWithTokenizer(
  probe: () => Promise<string | undefined>,
  timeoutMs = 120_000,
  intervalMs = 20,
): Promise<void> {
  await waitFor(
    'the plugin config to route with its tokenizer (not tokenizer_loading)',
    async () => (await probe()) !== TOKENIZER_LOADING,
    timeoutMs,
    intervalMs,
  );
}

const { route: ROUTE, service: SERVICE } = chatRoute('kinference-warm-up', 'warm-up.invalid');

const BODY = Buffer.from(JSON.stringify({ model: 'warm-up', messages: [{ role: 'user', content: 'hi' }] }));

function context(seq: number): ReturnType<typeof chatRequestContext> {
  return chatRequestContext(`ffff${seq.toString(16).padStart(28, '0')}`, BODY, ROUTE, SERVICE);
}

/**
 * Specs that check cache-aware routing on their first request wait here first (in-process stand-in): access
 * events for a config with the same tokenizer and template (loads are shared per spec in the plugin server),
 * an in-memory index with no pods and its own plugin entity, so nothing is proxied and the spec's router and Redis see nothing; until
 * the decision is no longer `tokenizer_loading` (a bad tokenizer ends it too, with its own reason).
 */
export async function waitPluginWarm(
  gw: Gateway,
  pluginConfig: Record<string, unknown>,
  timeoutMs = 120_000,
): Promise<void> {
  const ext = gw.plugins.get('kinference');
  if (!ext) return;
  // Telemetry off: the warm-up's decisions are no spans.
  const { otlp_endpoint: _otlp, ...config } = pluginConfig;
  // First on the event loop (decision_workers 0), then as configured. A decision worker that has loaded the
  // warm-up's config answers with its tokenizer while the event loop's own load may still run, and a spec's
  // config, which no worker has loaded yet, is prepared on the event loop first: tokenizer_loading (seen once
  // in CI). The second pass starts the pool as the config asks, as the warm-up always did.
  for (const [id, over] of [
    ['kinference-warm-up-loop', { decision_workers: 0 }],
    ['kinference-warm-up', {}],
  ] as const)
    await warmOnce(ext, id, { ...config, index: 'memory', expose_headers: true, ...over }, timeoutMs);
}

/** The warm-up's request ids, distinct across passes and calls. */
let warmUpSeq = 0;

async function warmOnce(
  ext: NonNullable<ReturnType<Gateway['plugins']['get']>>,
  id: string,
  config: Record<string, unknown>,
  timeoutMs: number,
): Promise<void> {
  const conf = ext.instanceConfig(
    {
      id: entityId('plugins', id),
      name: ext.name,
      instanceName: null,
      routeId: ROUTE.id,
      serviceId: null,
      enabled: true,
      config,
    },
    entityId('workspaces', 'default'),
  );
  await untilRoutesWithTokenizer(async () => {
    const pdk = new StandInPdk(context(warmUpSeq++), {
      phase: 'access',
      plugin: {
        id: String(conf.__plugin_id),
        name: ext.name,
        instanceName: null,
        routeId: ROUTE.id,
        serviceId: null,
        enabled: true,
        config: {},
      },
      workspaceId: 'ws',
      nodeId: 'node',
      hostname: 'warm-up',
      log: () => undefined,
    });
    const out = await ext.handleEvent(conf, 'access', pdk);
    if (out.kind !== 'done') return 'failed_open'; // nothing to wait for
    return upstreamHeadersOf(out.result)?.['x-kinference-fallback'];
  }, timeoutMs);
}
