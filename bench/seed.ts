/**
 * `npm run bench:seed`: the published study's full schedule (3 workloads × Poisson + concurrency
 * 4/8/16/24/32 × 9 arms × 3 trials) in virtual time, on the real router core and the emulator's engine.
 * Writes bench/results/seed.{json,md} and bench/results/charts/seed-*.svg.
 */
import { runBenchScript } from './lib/main.js';
import { SEED_SCHEDULE } from './lib/schedule.js';

await runBenchScript(SEED_SCHEDULE, 'seed', import.meta.url);
