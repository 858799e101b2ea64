// Imported FIRST by bench/fleet.ts: `--help` and a bad option answer here, before the benchmark's own imports
// (engine, Redis client, tokenizers) evaluate — ES modules evaluate in import order.
import { PROFILES } from '../../../emulator/profiles.js';
import { benchArgs } from '../cli.js';
import { SEED_SCHEDULE } from '../schedule.js';

export const USAGE = `npm run bench:fleet -- [options]: the benchmark's emulated fleet behind a kube-proxy-like Service and
the Kong route with kinference, running until Ctrl-C (drive it with bench:load)

  --pods N                  emulated vLLM pods (default ${SEED_SCHEDULE.pods})
  --time-scale X            the pods run X times slower than the model (default 1: real time)
  --emulator-profile P      ${Object.keys(PROFILES).join(' or ')} (default ${SEED_SCHEDULE.emulatorProfile})
  --kv-capacity T           KV cache per pod, tokens (default ${SEED_SCHEDULE.kvCapacityTokens}; another profile brings its own)
  --admission-ttft-ms MS    with --admission-itl-ms: a third route, kinference with admission control
  --admission-itl-ms MS     (shed_ttft_slo_ms and itl_slo_ms)
  --admission-config JSON   more plugin settings for that route, e.g. '{"itl_decode_from_metrics":false}'`;

export const values = benchArgs('bench:fleet', USAGE, {
  pods: { type: 'string', default: String(SEED_SCHEDULE.pods) },
  'time-scale': { type: 'string', default: '1' },
  'emulator-profile': { type: 'string', default: SEED_SCHEDULE.emulatorProfile },
  'kv-capacity': { type: 'string' },
  'admission-ttft-ms': { type: 'string' },
  'admission-itl-ms': { type: 'string' },
  'admission-config': { type: 'string' },
});
