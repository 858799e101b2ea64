// bench:overhead's usage, imported FIRST by bench/overhead.ts: `--help` answers before heavy imports load.
// A bad option answers here too, before the engine, Redis client and tokenizers evaluate (in import order).
import { benchArgs } from '../cli.js';

export const values = benchArgs(
  'bench:overhead',
  `npm run bench:overhead [-- --only 16k|long|metrics]: what routing one chat request costs, in this process.
16k: a 16k-token prompt, 8 pods, ~100k index entries in a real redis-server; decision time warm and cold, Redis
time per lookup, tokenizer throughput. Writes bench/results/overhead.json. KINF_BENCH_WARM (default 300) and
KINF_BENCH_COLD (40) set the runs.
long (issue #30): coding-agent contexts of 100k and 240k tokens, 8 and 96 pods holding prefixes of them; a new
turn on a known context, the same body again, a never-seen context; the breakdown per step and the heap.
Writes bench/results/overhead-long.json. KINF_BENCH_LONG_WARM (default 40) and KINF_BENCH_LONG_COLD (6).

metrics (issue #34): what recording a decision's metrics adds per request (interleaved with and without, the
same routes), and one flush to Redis. Writes bench/results/overhead-metrics.json. KINF_BENCH_METRICS_RUNS (300).

--only 16k|long|metrics   run one of them (default: 16k and long).`,
  { only: { type: 'string' } },
);
if (values.only !== undefined && !['16k', 'long', 'metrics'].includes(values.only)) {
  console.error(`bench:overhead: --only must be 16k, long or metrics, got ${values.only}`);
  process.exit(2);
}
