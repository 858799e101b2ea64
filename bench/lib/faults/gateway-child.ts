// The Kong stand-in in a child process for the fault bench: counts plugin events, answers over IPC.
import { existsSync, readFileSync } from 'node:fs';
import { upstreamHeadersOf } from '../../../harness/plugin-warm-up.js';
import { routeStepsOf } from '../../../harness/route-timings.js';
import { startGateway, stderrLogger, jsPluginServerDef } from '../../../kong/stand-in/index.js';
import {
  ACCESS_TIMES_KEPT,
  type GatewayMessage,
  type GatewayReply,
  type GatewayStats,
} from './gateway-ipc.js';

/**
 * argv: kong.json path, listen port, plugins dir, socket prefix, plugin state file. The parent (gateway-proc.ts)
 * asks for stats, a plugin-server kill or a state dump over IPC; the stand-in's own memory is this process's.
 */
const [kongConfig, port, pluginsDir, prefix, stateFile] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
];
const stats: GatewayStats = {
  events: { access: 0, log: 0 },
  failedOpen: 0,
  pdkErrors: 0,
  startInstanceErrors: 0,
  fallbackLines: [],
  errLines: 0,
  pluginServerPid: null,
  spawns: 0,
  memory: process.memoryUsage(),
  accessTimes: [],
};
const round2 = (ms: number): number => Math.round(ms * 100) / 100;
const base = stderrLogger(process.env.KINF_FAULTS_LOG ? 'info' : 'err');
const gw = await startGateway({
  kongConfig: JSON.parse(readFileSync(kongConfig, 'utf8')) as Record<string, unknown>,
  port: Number(port),
  // Process starts are not what the faults measure: on a loaded machine they take far over Kong's 20 s.
  pluginServerReadyMs: 180_000,
  pluginServers: [
    jsPluginServerDef('kinference', pluginsDir, prefix, {
      // KINFERENCE_DEBUG_STATE: on SIGUSR2 the plugin server writes its memory after a full GC.
      nodeArgs: ['--expose-gc'],
      env: { KINFERENCE_DEBUG_STATE: stateFile },
    }),
  ],
  logger: (level, msg) => {
    if (/starting instance:/.test(msg)) stats.startInstanceErrors++;
    if (level === 'err') stats.errLines++;
    const m = /\[kinference\] (fallback \S+.*)$/.exec(msg);
    if (m && stats.fallbackLines.length < 200) stats.fallbackLines.push(m[1]!.slice(0, 200));
    base(level, msg);
  },
  onEvent: (e) => {
    stats.events[e.phase === 'log' ? 'log' : 'access']++;
    if (e.outcome.kind === 'failed_open') stats.failedOpen++;
    else if (e.outcome.result.end === 'pdk_error') stats.pdkErrors++;
    else if (e.phase === 'access') {
      const lookup = routeStepsOf(upstreamHeadersOf(e.outcome.result)).lookup;
      stats.accessTimes.push([Date.now(), round2(e.ms), lookup === undefined ? null : round2(lookup)]);
      if (stats.accessTimes.length > ACCESS_TIMES_KEPT) stats.accessTimes.splice(0, ACCESS_TIMES_KEPT / 10);
    }
  },
});
const proc = gw.plugins.get('kinference')!.server;

function reply(r: GatewayReply): void {
  process.send?.(r);
}

process.on('message', (m: GatewayMessage) => {
  void (async () => {
    try {
      if (m.cmd === 'stats') {
        stats.memory = process.memoryUsage();
        stats.pluginServerPid = proc.pid ?? null;
        stats.spawns = proc.spawns;
        reply({ id: m.id, ok: true, stats });
      } else if (m.cmd === 'kill-plugin-server') {
        const spawns = proc.spawns;
        await proc.kill('SIGKILL');
        reply({ id: m.id, ok: true, spawns });
      } else if (m.cmd === 'ready') {
        await gw.pluginServersReady(60_000);
        reply({ id: m.id, ok: true });
      } else if (m.cmd === 'dump') {
        // The plugin server's memory after a full GC (plugins/kinference/housekeeping.ts installStateDump).
        const pid = proc.pid;
        if (pid === undefined) return reply({ id: m.id, ok: false, error: 'plugin server not running' });
        const seqOf = (): number =>
          existsSync(stateFile) ? (JSON.parse(readFileSync(stateFile, 'utf8')) as { seq: number }).seq : 0;
        const before = seqOf();
        process.kill(pid, 'SIGUSR2');
        const deadline = Date.now() + 20_000;
        while (seqOf() <= before) {
          if (Date.now() > deadline) return reply({ id: m.id, ok: false, error: 'no state dump in 20 s' });
          await new Promise((r) => setTimeout(r, 50));
        }
        reply({ id: m.id, ok: true, dump: JSON.parse(readFileSync(stateFile, 'utf8')) as unknown });
      } else if (m.cmd === 'close') {
        await gw.close();
        reply({ id: m.id, ok: true });
        process.exit(0);
      }
    } catch (e) {
      reply({ id: m.id, ok: false, error: e instanceof Error ? e.message : String(e) });
    }
  })();
});
// The parent went away without a close: do not leave the plugin server behind.
process.on('disconnect', () => void gw.close().then(() => process.exit(0)));
process.on('SIGTERM', () => void gw.close().then(() => process.exit(0)));
reply({ id: 0, ok: true, listening: gw.url });
