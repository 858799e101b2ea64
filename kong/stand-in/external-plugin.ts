// One external plugin as Kong's plugin-server runtime drives it: instances, events, failing open.
import { runEvent, type EventResult, type PdkHandler } from './bridge.js';
import type { PluginEntity } from './declarative.js';
import type { Logger, PluginInfo, PluginServerProcess } from './plugin-server.js';
import { processPluginConfig } from './process-config.js';
import { MsgpackRpcClient, RpcError } from './rpc-client.js';
import { KinferenceError } from '../../src/core/errors.js';

/**
 * One external plugin as Kong's plugin_servers/plugin.lua + rpc/mp_rpc.lua drive it: instances keyed by the
 * plugin entity id (kong.plugin.get_id()) and reused while `__seq__` matches; StartInstance on first use;
 * "no plugin instance" (the server restarted) → reset every instance of the plugin and retry the event once;
 * any other RPC failure is logged and the request goes on without the plugin (fail open). A StartInstance
 * failure is an error (Kong's get_instance_id raises → 500).
 */

export type HandleOutcome = { kind: 'done'; result: EventResult } | { kind: 'failed_open'; error: string };

export class StartInstanceError extends Error {}

export class ExternalPlugin {
  readonly info: PluginInfo;
  readonly server: PluginServerProcess;
  readonly rpc: MsgpackRpcClient;
  #log: Logger;
  #instances = new Map<string, { id: number; seq: number }>();
  #starting = new Map<string, Promise<number>>();
  #seq = 0;

  constructor(info: PluginInfo, server: PluginServerProcess, log: Logger, rpcTimeoutMs?: number) {
    this.info = info;
    this.server = server;
    this.#log = log;
    this.rpc = new MsgpackRpcClient(
      server.def.socket,
      rpcTimeoutMs === undefined ? {} : { timeoutMs: rpcTimeoutMs },
    );
  }

  get name(): string {
    return this.info.Name;
  }

  get priority(): number {
    return this.info.Priority;
  }

  hasPhase(phase: string): boolean {
    return this.info.Phases.includes(phase);
  }

  /**
   * Kong's processed config for one plugin entity (plugins_iterator get_plugin_config): schema defaults, nulls
   * for unset optional fields, and Kong's own keys. nil-valued keys (route_id of a global plugin…) are absent
   * from the cjson output, exactly as Lua drops nil table entries.
   */
  instanceConfig(plugin: PluginEntity, workspaceId: string): Record<string, unknown> {
    const r = processPluginConfig(this.info.Schema.fields[0].config.fields, plugin.config);
    if (!r.ok) {
      const lines = Object.entries(r.errors).map(([k, v]) => `  config.${k}: ${v}`);
      throw new KinferenceError(
        'KINF_ERR_CONFIG',
        `schema violation for plugin ${plugin.name} (${plugin.id}):\n${lines.join('\n')}`,
      );
    }
    const cfg: Record<string, unknown> = { ...r.config };
    if (plugin.routeId) cfg.route_id = plugin.routeId;
    if (plugin.serviceId) cfg.service_id = plugin.serviceId;
    if (plugin.consumerId) cfg.consumer_id = plugin.consumerId;
    if (plugin.consumerGroupId) cfg.consumer_group_id = plugin.consumerGroupId; // Enterprise
    if (plugin.instanceName) cfg.plugin_instance_name = plugin.instanceName;
    cfg.__plugin_id = plugin.id;
    cfg.__ws_id = workspaceId;
    // DAO:cache_key(name, route, service, consumer, consumer_group (nil in OSS), ws): seven fields.
    cfg.__key__ =
      `plugins:${plugin.name}:${plugin.routeId ?? ''}:${plugin.serviceId ?? ''}:` +
      `${plugin.consumerId ?? ''}:${plugin.consumerGroupId ?? ''}:${workspaceId}`;
    cfg.__seq__ = this.#seq++;
    return cfg;
  }

  async #instanceId(conf: Record<string, unknown>): Promise<number> {
    const key = String(conf.__plugin_id);
    const known = this.#instances.get(key);
    if (known && known.seq === conf.__seq__) return known.id;
    const pending = this.#starting.get(key);
    if (pending) return pending;
    const start = (async () => {
      try {
        const status = (await this.rpc.call('plugin.StartInstance', {
          Name: this.info.Name,
          Config: JSON.stringify(conf),
        })) as { Id?: unknown };
        if (typeof status?.Id !== 'number')
          throw new Error(`StartInstance returned no Id: ${JSON.stringify(status)}`);
        this.#instances.set(key, { id: status.Id, seq: Number(conf.__seq__) });
        if (known) void this.rpc.call('plugin.CloseInstance', known.id).catch(() => undefined);
        return status.Id;
      } catch (e) {
        this.#log('err', `starting instance: ${e instanceof Error ? e.message : String(e)}`);
        throw new StartInstanceError(e instanceof Error ? e.message : String(e));
      } finally {
        this.#starting.delete(key);
      }
    })();
    this.#starting.set(key, start);
    return start;
  }

  /** Kong's reset_instance: forget every instance of this plugin (all configs). */
  resetInstances(): void {
    this.#instances.clear();
  }

  /** Runs `phase` for the plugin config `conf`. Throws StartInstanceError (→ 500) like Kong. */
  async handleEvent(conf: Record<string, unknown>, phase: string, pdk: PdkHandler): Promise<HandleOutcome> {
    for (let attempt = 0; ; attempt++) {
      const id = await this.#instanceId(conf);
      try {
        return { kind: 'done', result: await runEvent(this.rpc, id, phase, pdk) };
      } catch (e) {
        const msg = e instanceof Error ? e.message : String(e);
        if (e instanceof RpcError && /no plugin instance/i.test(msg) && attempt === 0) {
          this.#log('warn', msg);
          this.resetInstances();
          continue;
        }
        this.#log('err', msg);
        return { kind: 'failed_open', error: msg };
      }
    }
  }

  close(): void {
    this.rpc.close();
  }
}
