// bench:plugin's usage, imported FIRST by bench/plugin.ts: `--help` answers before heavy imports load.
// A bad option answers here too, before the engine, Redis client and tokenizers evaluate (in import order).
import { benchArgs } from '../cli.js';

export const values = benchArgs(
  'bench:plugin',
  `npm run bench:plugin [-- --cold-start | --long | --policies]: the latency the plugin adds to a request, through the real
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
              bench/results/plugin-long.json. KINF_BENCH_LONG_WARM (default 40), KINF_BENCH_LONG_COLD (6).

--policies    instead (issue #31): the access phase with no policies, with identity and classes, and with
              a token limit too, interleaved request by request (64 KB bodies, an authenticated consumer in a
              group): what identity (PDK calls) and the limit's Redis round trip add. Writes
              bench/results/plugin-policies.json.

--pool        instead (issue #37): one plugin server per decision_workers value (0 = inline, 1, N = the cores
              available, or KINF_BENCH_POOL_WORKERS), all running, each phase run arm after arm; over
              KINF_BENCH_POOL_CONNECTIONS (default 4) concurrent connections: decisions/s at 1k, 15k and 100k
              tokens, warm and new context (KINF_BENCH_POOL_WARM, 200 warm 15k; the others scale with it), a
              small request's p99 and time split alone, beside new 100k-token contexts and beside the worst
              bodies (KINF_BENCH_POOL_SMALL, 60), each worst body's own decision, plugin-server RSS, segment
              cache hit rates and long jobs per worker. Writes bench/results/plugin-pool.json.`,
  {
    'cold-start': { type: 'boolean' },
    long: { type: 'boolean' },
    policies: { type: 'boolean' },
    pool: { type: 'boolean' },
  },
);
