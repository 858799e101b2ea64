/**
 * `npm run bench:seed`: the published study's full schedule (3 workloads × Poisson + concurrency
 * 4/8/16/24/32 × 8 arms × 3 trials) in virtual time, on the real router core and the emulator's engine.
 * Writes bench/results/seed.{json,md} and bench/results/charts/seed-*.svg.
 */
import { runBench } from './lib/main.js';
import { scheduleFromArgs } from './lib/cli-args.js';
import { SEED_SCHEDULE } from './lib/schedule.js';

const argv = process.argv.slice(2);
const { schedule, workers } = scheduleFromArgs(SEED_SCHEDULE, argv);
const out = await runBench(schedule, {
  // The exact command: the npm script runs the compiled file; tsx runs this source directly.
  command: (import.meta.url.endsWith('.ts')
    ? ['npx tsx bench/seed.ts', ...argv]
    : ['npm run bench:seed', ...(argv.length ? ['--', ...argv] : [])]
  ).join(' '),
  workers,
  progress: true,
  resultsDir: 'bench/results',
});
console.log(out.markdown);
console.log(`\nwrote ${out.files.join(', ')}`);
