// bench:emulator's usage, imported FIRST by bench/emulator.ts: `--help` answers before heavy imports load.
// A bad option answers here too, before the engine, Redis client and tokenizers evaluate (in import order).
import { noOptions } from '../cli.js';

noOptions(
  'bench:emulator',
  `what the emulated vLLM engine predicts (cold and cached TTFT, ITL per profile) and what it
costs to run, in virtual time and live. Writes bench/results/emulator.json. KINF_BENCH_REQUESTS (default 120)
and KINF_BENCH_LIVE (40) set the runs.`,
);
