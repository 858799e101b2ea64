// Imported FIRST by bench/live.ts: `--help` and a bad option answer here, before the benchmark's own imports
// (engine, Redis client, tokenizers) evaluate — ES modules evaluate in import order.
import { CLIENT_ARG_OPTIONS, clientArgsUsage } from '../cli-args.js';
import { benchArgs } from '../cli.js';
import { SEED_SCHEDULE } from '../schedule.js';

export const USAGE = `npm run bench:live -- [options]: one cell in virtual time and against real processes, side by side;
writes bench/results/<name>.{json,md}

  --workload W           control, shared-prefix or multiturn (default multiturn)
  --rate R               the Poisson cell at R requests/s (default: the seed's rate for the workload)
  --concurrency N        N closed-loop streams instead of the Poisson cell
  --arms a,b,...         of random, kinference, kinference-slo (default random,kinference)
  --time-scale X         real processes run X times slower than the model (default 2)
  --measure-s S          measurement window, virtual seconds (default 150; warmup 60, cooldown 20)
  --trial N              which trial's prompts (default 0)
  --des-path P           the twin's path latency: measured (probed on the stack, default) or seed
  --replicates N         twin runs with the path jittered (default 9)
  --one-stack            run the arms one after another on one stack
  --name NAME            results file name (default live)
${clientArgsUsage(SEED_SCHEDULE)}`;

export const values = benchArgs('bench:live', USAGE, {
  workload: { type: 'string', default: 'multiturn' },
  'time-scale': { type: 'string', default: '2' },
  'measure-s': { type: 'string', default: '150' },
  trial: { type: 'string', default: '0' },
  arms: { type: 'string', default: 'random,kinference' },
  concurrency: { type: 'string', default: '' },
  ...CLIENT_ARG_OPTIONS,
  rate: { type: 'string' },
  name: { type: 'string', default: 'live' },
  'des-path': { type: 'string', default: 'measured' },
  replicates: { type: 'string', default: '9' },
  'one-stack': { type: 'boolean', default: false },
});
