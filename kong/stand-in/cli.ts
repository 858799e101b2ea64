// `kinference gateway`: runs the Kong stand-in on a declarative config (SIGHUP reloads it) until stopped.
import { KinferenceError } from '../../src/core/errors.js';
import { listenError } from '../../src/util/listen-failure.js';
import { startGateway, stderrLogger } from './gateway.js';

export interface GatewayCliOptions {
  kongConfig: string;
  listen: string;
  pluginsDir?: string;
  prefix?: string;
  logLevel: string;
}

export function parseListen(listen: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(listen);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535)
    throw new KinferenceError('KINF_ERR_CONFIG', `--listen must be host:port, got ${listen}`);
  return { host: m[1] ?? (m[2] || '0.0.0.0'), port };
}

export async function runGateway(opts: GatewayCliOptions): Promise<void> {
  const { host, port } = parseListen(opts.listen);
  const levels = ['debug', 'info', 'notice', 'warn', 'err'];
  if (!levels.includes(opts.logLevel))
    throw new KinferenceError('KINF_ERR_CONFIG', `--log-level must be one of ${levels.join(', ')}`);
  const gw = await startGateway({
    kongConfig: opts.kongConfig,
    host,
    port,
    logger: stderrLogger(opts.logLevel as 'notice'),
    ...(opts.pluginsDir ? { pluginsDir: opts.pluginsDir } : {}),
    ...(opts.prefix ? { prefix: opts.prefix } : {}),
  }).catch((e: unknown) => {
    // A busy or foreign --listen address: one line and exit 2, not a stack trace.
    throw listenError(`--listen ${opts.listen}`, e);
  });
  process.stderr.write(`kinference gateway listening on ${gw.url} (Kong stand-in, ${opts.kongConfig})\n`);
  // SIGHUP reloads the file, as `kong reload` (or a DB-less config push) would; a bad file keeps the old one.
  const reload = (): void => {
    try {
      gw.reload(opts.kongConfig);
    } catch (e) {
      // One line: a YAML error's message spans several (the excerpt and its caret).
      const why = (e instanceof Error ? e.message : String(e)).replace(/\s*\n\s*/g, ' ');
      process.stderr.write(
        `kinference gateway: ${opts.kongConfig} not reloaded, the previous configuration stays: ${why}\n`,
      );
    }
  };
  process.on('SIGHUP', reload);
  await new Promise<void>((resolve) => {
    const stop = (): void => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      process.off('SIGHUP', reload);
      void gw.close().then(resolve);
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}
