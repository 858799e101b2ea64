/**
 * bench:faults — faults under sustained traffic (issue #33 items 1 and 3): Redis killed and restarted empty,
 * hung (SIGSTOP), slow; the collector, a pod and the plugin server killed; each under an independent client's
 * streaming and non-streaming chat traffic. Reports failed requests, added p50/p99 latency during the fault
 * and the time until cached prompt tokens are back to 90% of before; `--soak S` adds S seconds of traffic with
 * faults injected periodically and samples the memory of the plugin server, collector, stand-in and Redis.
 * Writes bench/results/faults.{json,md} with the command.
 *
 *   npm run bench:faults
 *   npm run bench:faults -- --soak 600
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../kong/stand-in/index.js';
import { benchArgs, numberArg, orUsage, UsageError } from './lib/cli.js';
import { FAULT_NAMES, type FaultName } from './lib/faults/faults.js';
import { faultsMarkdown } from './lib/faults/report.js';
import { runFaults } from './lib/faults/run-faults.js';
import { MODEL_NAME, qwen3TokenizerDir } from './lib/setup.js';

const SCRIPT = 'bench:faults';
const USAGE = `usage: npm run ${SCRIPT} -- [--faults a,b,…] [--soak SECONDS] [--soak-every S] [--hold S] [--baseline S]
                             [--streams N] [--out-dir DIR]

Starts Redis, 3 emulated pods (one process each), the collector and the Kong stand-in with the real plugin
server, keeps chat traffic flowing through the stand-in, and injects each fault in turn:
  ${FAULT_NAMES.join(', ')}
For each: failed requests, added p50/p99 latency during the fault, time until cached prompt tokens are back to
≥ 90% of before. --soak SECONDS then runs that long with a Redis or pod fault every --soak-every seconds
(default 60) and reports the memory slopes of the plugin server, collector, stand-in and Redis.
--faults none skips the single faults. Writes bench/results/faults.{json,md} unless --out-dir says otherwise.`;

const args = benchArgs(SCRIPT, USAGE, {
  faults: { type: 'string' },
  soak: { type: 'string' },
  'soak-every': { type: 'string' },
  hold: { type: 'string' },
  baseline: { type: 'string' },
  streams: { type: 'string' },
  'out-dir': { type: 'string' },
});
const opts = orUsage(SCRIPT, USAGE, () => {
  const faults =
    args.faults === undefined
      ? [...FAULT_NAMES]
      : args.faults === 'none'
        ? []
        : args.faults.split(',').map((f) => {
            if (!(FAULT_NAMES as readonly string[]).includes(f))
              throw new UsageError(`--faults ${f}: expected one of ${FAULT_NAMES.join(', ')} or none`);
            return f as FaultName;
          });
  return {
    faults,
    soak: args.soak === undefined ? 0 : numberArg('soak', args.soak, 'whole ≥ 1'),
    soakEvery:
      args['soak-every'] === undefined ? 60 : numberArg('soak-every', args['soak-every'], 'whole ≥ 1'),
    hold: args.hold === undefined ? 5 : numberArg('hold', args.hold, 'positive'),
    baseline: args.baseline === undefined ? 8 : numberArg('baseline', args.baseline, 'positive'),
    streams: args.streams === undefined ? 4 : numberArg('streams', args.streams, 'whole ≥ 1'),
  };
});
const outDir = args['out-dir'] ?? join(packageRoot(), 'bench', 'results');
// The children's log lives beside the build's scratch files; a fresh checkout has no .tmp yet.
mkdirSync(join(packageRoot(), '.tmp'), { recursive: true });
const command = `npm run ${SCRIPT}${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`;

const report = await runFaults({
  stack: {
    pods: 3,
    timeScale: 10,
    kvCapacityTokens: 4096,
    model: {
      name: MODEL_NAME,
      tokenizerSpec: `hf:${join(qwen3TokenizerDir(), 'tokenizer.json')}`,
      templateSpec: 'chatml',
    },
    childLog: join(packageRoot(), '.tmp', 'faults-children.log'),
  },
  traffic: { streams: opts.streams, groups: 9, prefixWords: 900, maxTokens: 8, seed: 7 },
  faults: opts.faults,
  warmupRequests: 150,
  baselineS: opts.baseline,
  holdS: opts.hold,
  maxRecoveryS: 60,
  qualityRun: 20,
  ...(opts.soak > 0
    ? {
        soak: {
          seconds: opts.soak,
          everyS: opts.soakEvery,
          sampleS: Math.max(5, Math.round(opts.soak / 40)),
          // Not the collector or the plugin server: their memory is what the soak samples.
          faults: ['redis-hang', 'pod-restart', 'redis-slow', 'redis-restart-empty'] as FaultName[],
        },
      }
    : {}),
  log: (l) => process.stderr.write(`${SCRIPT}: ${l}\n`),
});

mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, 'faults.json'), JSON.stringify({ command, ...report }, null, 2) + '\n');
const md = faultsMarkdown(report, command);
writeFileSync(join(outDir, 'faults.md'), md);
process.stdout.write(md);
process.stderr.write(`${SCRIPT}: wrote ${join(outDir, 'faults.{json,md}')}\n`);
