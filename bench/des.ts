/**
 * `npm run bench:des -- [--trials N] [--arms a,b] [--workloads w] [--concurrency 4,8] [--rates w=r,...]
 * [--kv-capacity T] [--workers N] [--name out]`: the discrete-event benchmark with any schedule
 * (defaults: the published one). Writes bench/results/<name>.{json,md} and charts.
 */
import { runBench } from './lib/main.js';
import { scheduleFromArgs } from './lib/cli-args.js';
import { SEED_SCHEDULE } from './lib/schedule.js';

const argv = process.argv.slice(2);
const { schedule, workers } = scheduleFromArgs({ ...SEED_SCHEDULE, name: 'des' }, argv);
const out = await runBench(schedule, {
  command: (import.meta.url.endsWith('.ts')
    ? ['npx tsx bench/des.ts', ...argv]
    : ['npm run bench:des --', ...argv]
  ).join(' '),
  workers,
  progress: true,
  resultsDir: 'bench/results',
});
console.log(out.markdown);
console.log(`\nwrote ${out.files.join(', ')}`);
