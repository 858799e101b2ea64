// `kinference emulator`: starts the emulated fleet, prints where each pod listens, stops on a signal.
import { loadFleetConfig } from '../src/config/fleet-config.js';
import type { EmulatorSection } from '../src/config/emulator-section.js';
import { startEmulatorFleet } from './server/fleet.js';

export interface RunEmulatorOptions {
  config: string;
  pod?: string[];
  profile?: string;
  timeScale?: number;
  seed?: number;
  bindHost?: string;
}

/** `kinference emulator`: start the fleet, print where each pod listens, stop cleanly on SIGTERM/SIGINT. */
export async function runEmulator(opts: RunEmulatorOptions): Promise<void> {
  const cfg = loadFleetConfig(opts.config);
  const overrides: Partial<EmulatorSection> = {};
  if (opts.profile !== undefined) overrides.profile = opts.profile;
  if (opts.timeScale !== undefined) overrides.time_scale = opts.timeScale;
  if (opts.seed !== undefined) overrides.seed = opts.seed;
  const log = (line: string): void => console.error(`emulator ${line}`);
  const fleet = await startEmulatorFleet(cfg, {
    ...(opts.pod !== undefined ? { podIds: opts.pod } : {}),
    overrides,
    ...(opts.bindHost !== undefined ? { bindHost: opts.bindHost } : {}),
    log,
  });
  const s = fleet.settings;
  for (const p of fleet.pods) {
    const pc = cfg.pods?.find((x) => x.id === p.id);
    log(
      `[${p.id}] http://${p.address} (${pc?.model}) dp=${p.dataParallelSize}` +
        (pc?.kv_events ? ` kv_events=${pc.kv_events}` : '') +
        (pc?.kv_events_replay ? ` replay=${pc.kv_events_replay}` : ''),
    );
  }
  log(
    `profile ${s.profile}, time_scale ${s.time_scale}, kv_events ${s.kv_events_format}, seed ${s.seed}: ready`,
  );
  await new Promise<void>((resolve) => {
    let stopping = false;
    const stop = (sig: string): void => {
      if (stopping) return;
      stopping = true;
      log(`${sig}: shutting down`);
      fleet.close().then(resolve, (e: unknown) => {
        log(`shutdown error: ${String(e)}`);
        resolve();
      });
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
}
