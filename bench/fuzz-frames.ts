/**
 * `npm run bench:fuzz:frames -- --frames 12000 --seed 7`: a seeded fuzz of the KV-event frames the collector
 * reads (bench/lib/frame-fuzz/run.ts), against a real `kinference collector` process, real ZeroMQ and a real
 * redis-server. `--mode storm` sends frames that look like engine restarts and sequence jumps instead, and
 * measures how long the collector takes to settle and its peak RSS. Prints the figures and writes
 * bench/results/fuzz-frames[-storm].json with the command that produced it. A short run is a spec
 * (spec/02-integration/collector/frame-fuzz.spec.ts).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { benchArgs, numberArg, orUsage, UsageError } from './lib/cli.js';
import { runFrameFuzz } from './lib/frame-fuzz/run.js';

const USAGE = `npm run bench:fuzz:frames -- [options]
  --frames N     frames to send (default 2000)
  --seed N       the generator's seed (default 1)
  --mode M       fuzz (default: valid batches and every class of mutation) or storm (restart-looking
                 frames and sequence jumps after a preloaded replay buffer)
  --preload N    valid batches published first (default 50; storm 1000)
  --rate N       frames per second (default 2000)
  --settle-timeout S  seconds the collector may take to settle after the last frame (default 120)
  --out FILE     results file (default bench/results/fuzz-frames.json, storm: fuzz-frames-storm.json)`;

const values = benchArgs('bench:fuzz:frames', USAGE, {
  frames: { type: 'string' },
  seed: { type: 'string' },
  mode: { type: 'string' },
  preload: { type: 'string' },
  rate: { type: 'string' },
  'settle-timeout': { type: 'string' },
  out: { type: 'string' },
});
const opts = orUsage('bench:fuzz:frames', USAGE, () => {
  const mode = values.mode ?? 'fuzz';
  if (mode !== 'fuzz' && mode !== 'storm') throw new UsageError(`--mode ${mode}: fuzz or storm`);
  return {
    mode: mode as 'fuzz' | 'storm',
    frames: values.frames === undefined ? 2000 : numberArg('frames', values.frames, 'whole ≥ 1'),
    seed: values.seed === undefined ? 1 : numberArg('seed', values.seed, 'whole ≥ 0'),
    ...(values.preload === undefined ? {} : { preload: numberArg('preload', values.preload, 'whole ≥ 0') }),
    ...(values.rate === undefined ? {} : { rate: numberArg('rate', values.rate, 'whole ≥ 1') }),
    ...(values['settle-timeout'] === undefined
      ? {}
      : { settleTimeoutMs: 1000 * numberArg('settle-timeout', values['settle-timeout'], 'whole ≥ 1') }),
  };
});
const out = values.out ?? `bench/results/fuzz-frames${opts.mode === 'storm' ? '-storm' : ''}.json`;
const command = `npm run bench:fuzz:frames -- ${process.argv.slice(2).join(' ')}`.trim();

const r = await runFrameFuzz({ ...opts, log: (l) => console.error(l) });
const { stderrTail, ...collector } = r.collector;
console.log(
  JSON.stringify({ ...r, collector: { ...collector, stderrTail: stderrTail.slice(-500) } }, null, 2),
);
mkdirSync('bench/results', { recursive: true });
writeFileSync(out, `${JSON.stringify({ command, at: new Date().toISOString(), ...r }, null, 2)}\n`);
console.error(`wrote ${out}`);
process.exitCode = r.collector.alive && r.collector.healthz === 200 ? 0 : 1;
