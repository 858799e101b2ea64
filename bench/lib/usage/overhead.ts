// bench:overhead's usage, imported FIRST by bench/overhead.ts: `--help` answers before heavy imports load.
// A bad option answers here too, before the engine, Redis client and tokenizers evaluate (in import order).
import { noOptions } from '../cli.js';

noOptions(
  'bench:overhead',
  `what routing one chat request costs: a 16k-token prompt, 8 pods, ~100k index entries in a
real redis-server; decision time warm and cold, Redis time per lookup, tokenizer throughput. Writes
bench/results/overhead.json. KINF_BENCH_WARM (default 300) and KINF_BENCH_COLD (40) set the runs.`,
);
