// Messages between the fault bench and its stand-in child (gateway-child.ts).
/** What the stand-in saw: plugin events by phase, how they ended, and the lines that name a fallback. */
export interface GatewayStats {
  events: { access: number; log: number };
  /** Events the stand-in gave up on (RPC failure: the request went on without the plugin). */
  failedOpen: number;
  /** Events that ended in a PDK error (Kong answers 500 in access). */
  pdkErrors: number;
  /** StartInstance failures: Kong's documented 500 before an instance exists. */
  startInstanceErrors: number;
  /** The plugin's `fallback <reason>, …` lines (log-once: one per reason a minute). */
  fallbackLines: string[];
  errLines: number;
  pluginServerPid: number | null;
  spawns: number;
  memory: NodeJS.MemoryUsage;
  /**
   * Access phases the plugin ran (not failed open), newest last, at most ACCESS_TIMES_KEPT: when each ended
   * (epoch ms), how long the gateway waited for it (ms: the fault's own cost to a request, without the pods'
   * queues), and the plugin's index lookup step inside it (ms, from x-kinference-route-timings; null when the
   * route did not say, e.g. a fallback before the lookup). The lookup is what `redis_timeout_ms` bounds.
   */
  accessTimes: [endEpochMs: number, ms: number, lookupMs: number | null][];
}

export const ACCESS_TIMES_KEPT = 50_000;

export type GatewayMessage = { id: number } & (
  { cmd: 'stats' } | { cmd: 'kill-plugin-server' } | { cmd: 'ready' } | { cmd: 'dump' } | { cmd: 'close' }
);

export interface GatewayReply {
  id: number;
  ok: boolean;
  error?: string;
  listening?: string;
  stats?: GatewayStats;
  spawns?: number;
  dump?: unknown;
}
