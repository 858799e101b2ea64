// bench:plugin's usage, imported FIRST by bench/plugin.ts: `--help` answers before heavy imports load.
// A bad option answers here too, before the engine, Redis client and tokenizers evaluate (in import order).
import { benchArgs } from '../cli.js';

export const values = benchArgs(
  'bench:plugin',
  `npm run bench:plugin [-- --cold-start]: the latency the plugin adds to a request, through the real
kong-js-pluginserver over its socket (the Kong stand-in's RPC client), the index in a private redis-server.
Writes bench/results/plugin.json. KINF_BENCH_REQUESTS (default 300) sets the requests per configuration; the
other runs scale with it (CI runs a small one).

--cold-start  instead: a fresh plugin server per tokenizer (tiktoken:o200k_base, hf: Qwen3), one route warm
              and the other's first request: its access-phase time and the warm route's p50/p99 while the
              other's tokenizer loads. Writes bench/results/plugin-cold-start.json. KINF_BENCH_BEFORE_PLUGIN
              names a second bundle directory to measure the same way (the code before a change).

--long        instead (issue #30): 100k- and 240k-token coding-agent contexts, 8 and 96 pods holding prefixes
              of them, through the real plugin server: a new turn on a known context, the same body again, a
              never-seen context; HandleEvent→"ret", the body Step split into routing and transfer, the plugin
              server's RSS; then a short request's latency while long ones stream. Writes
              bench/results/plugin-long.json. KINF_BENCH_LONG_WARM (default 40), KINF_BENCH_LONG_COLD (6).`,
  { 'cold-start': { type: 'boolean' }, long: { type: 'boolean' } },
);
