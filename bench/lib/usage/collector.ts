// bench:collector's usage, imported FIRST by bench/collector.ts: `--help` answers before heavy imports load.
// A bad option answers here too, before the engine, Redis client and tokenizers evaluate (in import order).
import { noOptions } from '../cli.js';

if (process.argv[2] !== '--publisher')
  noOptions(
    'bench:collector',
    `the collector's ingest: a real redis-server and vLLM-like ZMQ publishers; event-to-index
lag, sustained throughput, CPU per event, memory. Writes bench/results/collector.json.
KINF_BENCH_SECONDS (default 8) sets each load phase's length; the restart phase and the replay buffers scale
with it (CI runs a 1-second one).`,
  );
