// bench:usage's usage, imported FIRST by bench/usage.ts: `--help` answers before heavy imports load.
// A bad option answers here too, before the engine, Redis client and tokenizers evaluate (in import order).
import { noOptions } from '../cli.js';

noOptions(
  'bench:usage',
  `how close the plugin's usage records come to the truth: three tenants' requests through the
live stack (Kong stand-in, plugin, collector, emulated pods, Redis); output tokens estimated from bytes sent
against the client's count per tenant, and predicted cached prompt tokens against vLLM's reported ones.
Writes bench/results/usage-estimate.{json,md}. KINF_BENCH_REQUESTS (default 40) sets requests per tenant,
KINF_BENCH_TIME_SCALE (default 0.25) the pods' speed.`,
);
