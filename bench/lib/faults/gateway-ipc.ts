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
}

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
