// Imported FIRST by bench/plugin.ts: `--help` and a bad option answer here, before the benchmark's own imports
// (engine, Redis client, tokenizers) evaluate — ES modules evaluate in import order.
import { noOptions } from '../cli.js';

noOptions(
  'bench:plugin',
  `the latency the plugin adds to a request, through the real kong-js-pluginserver over its
socket (the Kong stand-in's RPC client), the index in a private redis-server. Writes bench/results/plugin.json.
KINF_BENCH_REQUESTS (default 300) sets the requests per configuration; the other runs scale with it (CI runs a
small one).`,
);
