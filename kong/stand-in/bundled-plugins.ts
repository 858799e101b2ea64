// Kong's own (Lua) plugins the stand-in runs in-process (key-auth, rate-limiting, file-log), as in Kong 3.9.
import { closeSync, openSync, writeSync } from 'node:fs';
import { KinferenceError } from '../../src/core/errors.js';
import type { Phase } from './pdk.js';
import type { DeclarativeConfig, PluginEntity } from './declarative.js';
import type { KongExit } from './error-response.js';
import { keyAuth } from './key-auth.js';
import type { LogLevel } from './pdk.js';
import { rateLimiting } from './rate-limiting.js';
import { serialize, type RequestContext } from './request-context.js';

/** What a bundled plugin's handler sees of Kong besides the request: the loaded config, the error log. */
export interface BundledKong {
  config: DeclarativeConfig;
  workspaceId: string;
  log(level: LogLevel, msg: string): void;
}

/**
 * One of Kong's own (Lua) plugins, run in-process by the stand-in: its priority, phases, config check and
 * handler, as Kong 3.9 defines them.
 */
export interface BundledPlugin {
  name: string;
  priority: number;
  phases: ReadonlySet<Phase>;
  /** The schema's `consumer = typedefs.no_consumer` (auth plugins): it cannot be scoped to a consumer. */
  noConsumer?: boolean;
  /** Validates the entity's config and fills the schema defaults; throws KINF_ERR_CONFIG like Kong's loader. */
  configure(entity: PluginEntity): Record<string, unknown>;
  /** The access handler; an exit ends the request there (kong.response.exit/error). */
  access?(
    conf: Record<string, unknown>,
    ctx: RequestContext,
    kong: BundledKong,
  ): KongExit | undefined | Promise<KongExit | undefined>;
  log?(conf: Record<string, unknown>, ctx: RequestContext, workspaceId: string): void;
  /** The gateway stops: release what the plugin holds open. */
  close(): void;
}

/**
 * file-log (kong/plugins/file-log, priority 9): in the log phase, appends kong.log.serialize() as one JSON
 * line to `path` (O_WRONLY|O_CREAT|O_APPEND, mode 0644), keeping the descriptor open unless `reopen`.
 * `custom_fields_by_lua` needs Lua, which the stand-in does not run: it is refused, not ignored.
 */
function fileLog(): BundledPlugin {
  const fds = new Map<string, number>();
  return {
    name: 'file-log',
    priority: 9,
    phases: new Set<Phase>(['log']),
    configure(entity) {
      const c = entity.config;
      const where = `plugin file-log (${entity.id})`;
      const path = c.path;
      if (typeof path !== 'string' || path === '')
        throw new KinferenceError('KINF_ERR_CONFIG', `${where}: config.path: required field missing`);
      if (!/^[^*&%`]+$/.test(path))
        throw new KinferenceError('KINF_ERR_CONFIG', `${where}: config.path: not a valid filename`);
      const reopen = c.reopen ?? false;
      if (typeof reopen !== 'boolean')
        throw new KinferenceError('KINF_ERR_CONFIG', `${where}: config.reopen: expected a boolean`);
      if (c.custom_fields_by_lua !== undefined && c.custom_fields_by_lua !== null)
        throw new KinferenceError(
          'KINF_ERR_CONFIG',
          `${where}: config.custom_fields_by_lua needs Kong's Lua sandbox; the stand-in cannot run it`,
        );
      for (const k of Object.keys(c))
        if (!['path', 'reopen', 'custom_fields_by_lua'].includes(k))
          throw new KinferenceError('KINF_ERR_CONFIG', `${where}: config.${k}: unknown field`);
      return { path, reopen, custom_fields_by_lua: null };
    },
    log(conf, ctx, workspaceId) {
      const path = conf.path as string;
      const line = JSON.stringify(serialize(ctx, workspaceId)) + '\n';
      let fd = fds.get(path);
      if (fd !== undefined && conf.reopen) {
        closeSync(fd);
        fds.delete(path);
        fd = undefined;
      }
      if (fd === undefined) {
        fd = openSync(path, 'a', 0o644);
        fds.set(path, fd);
      }
      writeSync(fd, line);
    },
    close() {
      for (const fd of fds.values()) closeSync(fd);
      fds.clear();
    },
  };
}

/** Kong's bundled plugins the stand-in can run, by name (a fresh instance per gateway). */
export function bundledPlugins(): Map<string, BundledPlugin> {
  const all = [keyAuth(), rateLimiting(), fileLog()];
  return new Map(all.map((p) => [p.name, p]));
}
