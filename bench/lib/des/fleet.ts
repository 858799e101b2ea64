// fleetOf: the emulated fleet a benchmark schedule describes.
import type { BenchSchedule } from '../schedule.js';
import { engineProfile, type ModelSetup } from '../setup.js';
import type { FleetSpec } from './cell-setup.js';

/** The emulated fleet a schedule describes. */
export function fleetOf(s: BenchSchedule, m: ModelSetup): FleetSpec {
  const profile = engineProfile(s.emulatorProfile);
  return {
    pods: s.pods,
    pod: {
      profile,
      kvCapacityTokens: s.kvCapacityTokens,
      blockSize: 16,
      eosTokenId: m.eosTokenId,
      outputVocab: m.vocab.ids,
      ...(s.longPrefillTokenThreshold ? { longPrefillTokenThreshold: s.longPrefillTokenThreshold } : {}),
    },
    latency: s.latency,
  };
}
