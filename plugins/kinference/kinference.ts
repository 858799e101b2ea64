/**
 * The Kong plugin "kinference" (loaded by kong-js-pluginserver; bundled to ONE CommonJS file by
 * scripts/bundle-plugin.mjs). PDK glue only: the access phase routes through the shared router and sets the
 * target; the log phase feeds the measured TTFT back. No `response` phase: it would make Kong buffer the
 * whole upstream response and break SSE streaming (kong.md §3.3).
 *
 * Module load does nothing but define things: no timers, sockets or files (Kong's query command must print
 * JSON and exit). One exception, inside kong-js-pluginserver only: the receive framing (rpc-framing.ts) must
 * wrap net.createServer before kong-pdk's listener serves, which it does right after loading the plugins. Routers, Redis connections and tracers are module-level singletons keyed by config,
 * created on the first request (Kong builds one Plugin instance per config per worker, with no close hook);
 * the config's tokenizer and chat template start loading at instance start, in the background, and no
 * request waits for them (until they are loaded, requests are routed on load alone: tokenizer_loading).
 */
import { setGlobalErrorHandler } from '@opentelemetry/core';
import pkg from '../../package.json' with { type: 'json' };
import {
  PluginConfigSchema,
  pluginConfigFromKong,
  pluginConfigProblems,
  type PluginConfig,
} from '../../src/config/plugin-config.js';
import { KinferenceError } from '../../src/core/errors.js';
import { toKongSchema } from '../../src/config/to-kong-schema.js';
import { validateConfig } from '../../src/config/validate.js';
import { configRouter, preloadResources } from '../../src/router/index.js';
import { getDecisionTracer, shutdownAllTracers } from '../../src/telemetry/index.js';
import { runAccess, type PhaseDeps } from './access.js';
import { wrapCaller } from './caller.js';
import { installBinaryJsonShortcut, installExitEventCleanup } from './kong-pdk-workaround.js';
import { runLog } from './log-phase.js';
import { installRpcFraming, isPluginServerProcess } from './rpc-framing.js';
import { logOnce, takeLogLines, writeStderr } from './log-once.js';
import { installStateDump, startHousekeeping } from './housekeeping.js';
import { PENDING_MAX_ENTRIES, PENDING_TTL_MS, PendingDecisions } from './pending.js';
import { wrapKong, type RawKong } from './pdk.js';
import { usageDeps } from './usage-phase.js';
import { flushAllMetrics, metricsRecorder } from './metrics-phase.js';

if (isPluginServerProcess()) installRpcFraming();

export const Version: string = pkg.version;
/** After auth (1000+) and rate limiting (910), before Kong's OpenTelemetry plugin (14) (kong.md §6.2). */
export const Priority = 780;
export const Schema = toKongSchema(PluginConfigSchema);

/** KINFERENCE_PENDING_TTL_MS overrides the pending decisions' TTL (ms; tests, or requests known to be short). */
function pendingTtlMs(): number {
  const v = Number(process.env.KINFERENCE_PENDING_TTL_MS);
  return Number.isFinite(v) && v > 0 ? v : PENDING_TTL_MS;
}

const pending = new PendingDecisions(PENDING_MAX_ENTRIES, pendingTtlMs());

function describe(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

const otlpEndpoints = new Set<string>();

/**
 * The OTel SDK reports failed exports to its global error handler, which by default writes to a diag logger
 * nobody registered: a dead otlp_endpoint was silent. This process serves only this plugin, so take it.
 */
function watchExports(endpoint: string): void {
  if (otlpEndpoints.size === 0)
    setGlobalErrorHandler((e) =>
      logOnce('otlp', `span export failed (otlp_endpoint ${[...otlpEndpoints].join(', ')}): ${describe(e)}`),
    );
  otlpEndpoints.add(endpoint);
}

/** How long an exiting plugin server waits for its last spans to reach otlp_endpoint and its counts Redis. */
const EXIT_FLUSH_MS = 2000;
let exitFlushInstalled = false;

/**
 * Kong stops the plugin server with SIGTERM (kong.md §4.1), and Node's default is to die at once: the spans
 * still in the batch processor (up to its schedule delay) and the decision counts not yet flushed to Redis
 * were lost on every restart or deploy. Flush both, bounded, then die of the same signal so Kong still sees a
 * signal exit. Installed with the first config's dependencies.
 */
function flushOnExit(): void {
  if (exitFlushInstalled) return;
  exitFlushInstalled = true;
  for (const signal of ['SIGTERM', 'SIGINT'] as const)
    process.once(signal, () => {
      void Promise.all([shutdownAllTracers(EXIT_FLUSH_MS), flushAllMetrics(EXIT_FLUSH_MS)]).finally(() => {
        // Someone else handles the signal too: leave the exit to them.
        if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
      });
    });
}

/** Hands queued diagnostics to Kong (log phase, off the request path); stderr if Kong will not take them. */
async function flushLogLines(pdk: ReturnType<typeof wrapKong>): Promise<void> {
  const lines = takeLogLines();
  for (let i = 0; i < lines.length; i++) {
    try {
      await pdk.warn(lines[i]!);
    } catch {
      for (const line of lines.slice(i)) writeStderr(line);
      return;
    }
  }
}

/**
 * The config's decision tracer; null, said once at warn, when the exporter refuses the endpoint (e.g.
 * `http://:4318/…` from a template with an empty host): tracing off must not turn routing off.
 */
function tracerOrNull(config: PluginConfig, endpoint: string): PhaseDeps['tracer'] {
  try {
    return getDecisionTracer({
      endpoint,
      serviceName: config.service_name,
      serviceVersion: Version,
      sampleRatio: config.trace_sample_ratio,
    });
  } catch (e) {
    logOnce(
      `tracer:${endpoint}`,
      `tracing off for this config, routing goes on: otlp_endpoint ${endpoint}: ${describe(e)}`,
    );
    return null;
  }
}

class KinferencePlugin {
  #config: PluginConfig | null = null;
  #configError = '';
  #deps: PhaseDeps | null = null;

  constructor(rawConfig: unknown) {
    installExitEventCleanup();
    // Kong already checked each field against Schema; this applies defaults and the TypeBox-only rules (Kong's
    // own keys dropped first). A failure must not fail StartInstance (Kong would answer 500): requests then
    // pass through untouched.
    try {
      const config = validateConfig(
        PluginConfigSchema,
        pluginConfigFromKong(rawConfig),
        'kinference plugin config',
      );
      const problems = pluginConfigProblems(config);
      if (problems.length > 0)
        throw new KinferenceError(
          'KINF_ERR_CONFIG',
          `kinference plugin config: invalid configuration\n  ${problems.join('\n  ')}`,
        );
      this.#config = config;
    } catch (e) {
      this.#configError = describe(e);
      logOnce('config', `plugin disabled for this config, requests pass through: ${this.#configError}`);
    }
    if (this.#config) {
      // A load failure shows on the requests (tokenizer_error); a throw here would fail StartInstance (a 500).
      try {
        preloadResources(this.#config);
      } catch (e) {
        logOnce('preload', `tokenizer and template preload failed, they load on first use: ${describe(e)}`);
      }
    }
  }

  #phaseDeps(): PhaseDeps | null {
    if (this.#deps || !this.#config) return this.#deps;
    installBinaryJsonShortcut();
    startHousekeeping(pending);
    installStateDump(pending);
    const config = this.#config;
    if (config.otlp_endpoint) watchExports(config.otlp_endpoint);
    flushOnExit();
    this.#deps = {
      config,
      router: configRouter(config),
      tracer: config.otlp_endpoint ? tracerOrNull(config, config.otlp_endpoint) : null,
      pending,
      now: Date.now,
      usage: usageDeps(config),
      metrics: metricsRecorder(config),
    };
    return this.#deps;
  }

  async access(kong: RawKong): Promise<void> {
    try {
      const deps = this.#phaseDeps();
      if (deps) await runAccess(wrapKong(kong), deps, deps.config.policies ? wrapCaller(kong) : null);
      else logOnce('config', `plugin disabled for this config, requests pass through: ${this.#configError}`);
    } catch (e) {
      // Fail open: whatever went wrong, Kong proxies the request to what is set (the service url by default).
      logOnce(
        `access:${describe(e).slice(0, 80)}`,
        `access phase failed, request passed through: ${describe(e)}`,
      );
    }
  }

  async log(kong: RawKong): Promise<void> {
    const pdk = wrapKong(kong);
    try {
      const deps = this.#phaseDeps();
      if (deps) await runLog(pdk, deps);
    } catch (e) {
      logOnce(`log:${describe(e).slice(0, 80)}`, `log phase failed: ${describe(e)}`);
    }
    await flushLogLines(pdk);
  }
}

export const Plugin = KinferencePlugin;
