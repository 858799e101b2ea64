/**
 * The Kong plugin "kinference" (loaded by kong-js-pluginserver; bundled to ONE CommonJS file by
 * scripts/bundle-plugin.mjs). PDK glue only: the access phase routes through the shared router and sets the
 * target; the log phase feeds the measured TTFT back. No `response` phase: it would make Kong buffer the
 * whole upstream response and break SSE streaming (kong.md §3.3).
 *
 * Module load does nothing but define things: no timers, sockets or files (Kong's query command must print
 * JSON and exit). Routers, Redis connections and tracers are module-level singletons keyed by config,
 * created on the first request (Kong builds one Plugin instance per config per worker, with no close hook).
 */
import pkg from '../../package.json' with { type: 'json' };
import { PluginConfigSchema, type PluginConfig } from '../../src/config/plugin-config.js';
import { toKongSchema } from '../../src/config/to-kong-schema.js';
import { validateConfig } from '../../src/config/validate.js';
import { getRouter } from '../../src/router/index.js';
import { getDecisionTracer } from '../../src/telemetry/index.js';
import { runAccess, type PhaseDeps } from './access.js';
import { installBinaryJsonShortcut } from './kong-pdk-workaround.js';
import { runLog } from './log-phase.js';
import { logOnce } from './log-once.js';
import { PendingDecisions } from './pending.js';
import { wrapKong, type RawKong } from './pdk.js';

export const Version: string = pkg.version;
/** After auth (1000+) and rate limiting (910), before Kong's OpenTelemetry plugin (14) (kong.md §6.2). */
export const Priority = 780;
export const Schema = toKongSchema(PluginConfigSchema);

const pending = new PendingDecisions();

function describe(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

class KinferencePlugin {
  #config: PluginConfig | null = null;
  #deps: PhaseDeps | null = null;

  constructor(rawConfig: unknown) {
    // Kong already checked each field against Schema; this applies defaults and the TypeBox-only rules. A
    // failure must not fail StartInstance (Kong would answer 500): requests then pass through untouched.
    try {
      this.#config = validateConfig(PluginConfigSchema, rawConfig, 'kinference plugin config');
    } catch (e) {
      logOnce('config', `plugin disabled for this config, requests pass through: ${describe(e)}`);
    }
  }

  #phaseDeps(): PhaseDeps | null {
    if (this.#deps || !this.#config) return this.#deps;
    installBinaryJsonShortcut();
    const config = this.#config;
    this.#deps = {
      config,
      router: getRouter(config),
      tracer: config.otlp_endpoint
        ? getDecisionTracer({
            endpoint: config.otlp_endpoint,
            serviceName: config.service_name,
            serviceVersion: Version,
            sampleRatio: config.trace_sample_ratio,
          })
        : null,
      pending,
      now: Date.now,
    };
    return this.#deps;
  }

  async access(kong: RawKong): Promise<void> {
    try {
      const deps = this.#phaseDeps();
      if (deps) await runAccess(wrapKong(kong), deps);
    } catch (e) {
      // Fail open: whatever went wrong, Kong proxies the request to what is set (the service url by default).
      logOnce(
        `access:${describe(e).slice(0, 80)}`,
        `access phase failed, request passed through: ${describe(e)}`,
      );
    }
  }

  async log(kong: RawKong): Promise<void> {
    try {
      const deps = this.#phaseDeps();
      if (deps) await runLog(wrapKong(kong), deps);
    } catch (e) {
      logOnce(`log:${describe(e).slice(0, 80)}`, `log phase failed: ${describe(e)}`);
    }
  }
}

export const Plugin = KinferencePlugin;
