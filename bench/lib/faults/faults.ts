// The faults the bench injects, one at a time, each with how it starts and how it ends.
import type { FaultStack } from './stack.js';

export interface FaultDef {
  name: FaultName;
  /** What happens, for the report. */
  what: string;
  inject(s: FaultStack): Promise<void>;
  /** Ends the fault; resolves when the failed part is back (or, for Redis, answers again). */
  recover(s: FaultStack): Promise<void>;
  /** Redis comes back without the index: the bench times its refill. */
  losesIndex?: boolean;
}

export const FAULT_NAMES = [
  'redis-restart-empty',
  'redis-hang',
  'redis-slow',
  'collector-restart',
  'pod-restart',
  'plugin-server-kill',
] as const;
export type FaultName = (typeof FAULT_NAMES)[number];

/** Each DEBUG SLEEP of the slow-Redis fault: twice the plugin's default 25 ms lookup budget. */
export const SLOW_REDIS_SLEEP_MS = 50;

export const FAULTS: Record<FaultName, FaultDef> = {
  'redis-restart-empty': {
    name: 'redis-restart-empty',
    what: 'Redis SIGKILLed, then started again on its port with no data',
    inject: (s) => s.killRedis(),
    recover: (s) => s.restartRedisEmpty(),
    losesIndex: true,
  },
  'redis-hang': {
    name: 'redis-hang',
    what: 'Redis SIGSTOPped (connections open, no answers), then SIGCONT',
    inject: async (s) => s.hangRedis(),
    recover: async (s) => s.resumeRedis(),
  },
  'redis-slow': {
    name: 'redis-slow',
    what: `Redis busy in a DEBUG SLEEP ${SLOW_REDIS_SLEEP_MS} ms loop: every command waits up to ${SLOW_REDIS_SLEEP_MS} ms`,
    inject: async (s) => s.slowRedis(SLOW_REDIS_SLEEP_MS),
    recover: (s) => s.stopSlow(),
  },
  'collector-restart': {
    name: 'collector-restart',
    what: 'collector SIGKILLed (no handoff), then started again',
    inject: (s) => s.killCollector(),
    recover: (s) => s.startCollector(),
  },
  'pod-restart': {
    name: 'pod-restart',
    what: 'pod-1 (its emulator process) SIGKILLed, then started again with an empty KV cache',
    inject: (s) => s.killPod('pod-1'),
    recover: (s) => s.startPod('pod-1'),
  },
  'plugin-server-kill': {
    name: 'plugin-server-kill',
    what: 'the plugin server SIGKILLed; the stand-in respawns it as Kong does (at most once a second)',
    inject: (s) => s.killPluginServer(),
    recover: async (s) => {
      await s.pluginServersReady();
    },
  },
};
