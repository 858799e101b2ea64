/**
 * `npm run bench:smoke`: a tiny schedule (one trial, five arms, short windows) that finishes in well under a
 * minute; CI runs it through spec/01-unit/bench/smoke.spec.ts. Writes bench/results/smoke.{json,md}.
 */
import { runBench } from './lib/main.js';
import { SMOKE_SCHEDULE } from './lib/schedule.js';
import { noOptions } from './lib/cli.js';

noOptions(
  'bench:smoke',
  `a tiny discrete-event schedule (one trial, five arms, short windows), well under a minute.
Writes bench/results/smoke.{json,md}.`,
);

const out = await runBench(SMOKE_SCHEDULE, {
  command: 'npm run bench:smoke',
  workers: 0,
  progress: process.stderr.isTTY,
  resultsDir: 'bench/results',
  charts: false,
});
console.log(out.markdown);
