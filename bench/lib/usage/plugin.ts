// bench:plugin's usage, imported FIRST by bench/plugin.ts: `--help` answers before heavy imports load.
// A bad option answers here too, before the engine, Redis client and tokenizers evaluate (in import order).
import { noOptions } from '../cli.js';

noOptions(
  'bench:plugin',
  `the latency the plugin adds to a request, through the real kong-js-pluginserver over its
socket (the Kong stand-in's RPC client), the index in a private redis-server. Writes bench/results/plugin.json.
KINF_BENCH_REQUESTS (default 300) sets the requests per configuration; the other runs scale with it (CI runs a
small one).`,
);
