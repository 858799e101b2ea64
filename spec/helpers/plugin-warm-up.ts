// Waits until a config's tokenizer and chat template are loaded in the plugin server (no request proxied).
import type { Gateway } from '../../kong/stand-in/index.js';
import { entityId, type RouteEntity, type ServiceEntity } from '../../kong/stand-in/declarative.js';
import { StandInPdk } from '../../kong/stand-in/pdk.js';
import type { RequestContext } from '../../kong/stand-in/request-context.js';
import { waitFor } from './ports.js';

const ROUTE: RouteEntity = {
  id: entityId('routes', 'kinference-warm-up'),
  name: 'kinference-warm-up',
  serviceId: entityId('services', 'kinference-warm-up'),
  paths: ['/v1/chat/completions'],
  methods: ['POST'],
  hosts: null,
  stripPath: false,
  preserveHost: false,
  responseBuffering: false,
  requestBuffering: true,
  regexPriority: 0,
};
const SERVICE: ServiceEntity = {
  id: ROUTE.serviceId!,
  name: 'kinference-warm-up',
  protocol: 'http',
  host: 'warm-up.invalid',
  port: 8000,
  path: null,
  retries: 0,
  connectTimeoutMs: 60000,
  writeTimeoutMs: 60000,
  readTimeoutMs: 600000,
  enabled: true,
};

const BODY = Buffer.from(JSON.stringify({ model: 'warm-up', messages: [{ role: 'user', content: 'hi' }] }));

function context(seq: number): RequestContext {
  return {
    id: `ffff${seq.toString(16).padStart(28, '0')}`,
    startedAtMs: Date.now(),
    startedAtPerf: performance.now(),
    method: 'POST',
    path: '/v1/chat/completions',
    rawQuery: '',
    scheme: 'http',
    host: 'kong',
    port: 8000,
    clientIp: '127.0.0.1',
    httpVersion: 1.1,
    bodyBufferBytes: 8 << 20,
    headers: new Map([
      ['host', ['kong:8000']],
      ['content-type', ['application/json']],
      ['content-length', [String(BODY.length)]],
    ]),
    body: BODY,
    route: ROUTE,
    service: SERVICE,
    target: null,
    upstreamHost: null,
    upstreamMethod: 'POST',
    upstreamPath: '/v1/chat/completions',
    upstreamQuery: '',
    upstreamBody: null,
    retries: 0,
    timeouts: { connectMs: 60000, writeMs: 60000, readMs: 600000 },
    ctxShared: new Map(),
    serializeExtras: {},
    tries: [],
    response: null,
    upstreamStatus: null,
    marks: {},
  };
}

/**
 * Kong starts a plugin instance on its config's first request, and until the config's tokenizer and chat
 * template are loaded (in the background) requests are routed on load alone (`tokenizer_loading`). Specs that
 * check cache-aware routing on their first request wait here first: access events for a config with the
 * same tokenizer and template (loads are shared per spec in the plugin server), an in-memory index with no
 * pods and its own plugin entity, so nothing is proxied and the spec's router and Redis see nothing; until
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
  const conf = ext.instanceConfig(
    {
      id: entityId('plugins', 'kinference-warm-up'),
      name: ext.name,
      instanceName: null,
      routeId: ROUTE.id,
      serviceId: null,
      enabled: true,
      config: { ...config, index: 'memory', expose_headers: true },
    },
    entityId('workspaces', 'default'),
  );
  let seq = 0;
  await waitFor(
    'the plugin config to route with its tokenizer (not tokenizer_loading)',
    async () => {
      const pdk = new StandInPdk(context(seq++), {
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
      if (out.kind !== 'done') return true; // failed open: nothing to wait for
      const headers = out.result.steps.find((x) => x.method === 'kong.service.request.set_headers')
        ?.args[0] as Record<string, string> | undefined;
      return headers?.['x-kinference-fallback'] !== 'tokenizer_loading';
    },
    timeoutMs,
  );
}
