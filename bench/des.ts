/**
 * `npm run bench:des -- [--trials N] [--arms a,b] [--workloads w] [--concurrency 4,8] [--rates w=r,...]
 * [--kv-capacity T] [--workers N] [--name out]`: the discrete-event benchmark with any schedule
 * (defaults: the published one). Writes bench/results/<name>.{json,md} and charts.
 */
import { runBenchScript } from './lib/main.js';
import { SEED_SCHEDULE } from './lib/schedule.js';

await runBenchScript({ ...SEED_SCHEDULE, name: 'des' }, 'des', import.meta.url);
