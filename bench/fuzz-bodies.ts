/**
 * bench:fuzz:bodies — the seeded body fuzz (issue #36): generated and mutated chat bodies (invalid JSON and
 * UTF-8, deep nesting, 1–10 MB strings, 100k messages, wrong types, unknown roles, tools of every shape,
 * malformed query strings and headers) sent through the Kong stand-in + the real plugin server to an emulated
 * pod, and the same body straight to the pod. Prints bodies, statuses, mismatches, the worst CPU time per
 * request in the plugin server, its RSS (start, after warm-up, after the run, after a forced GC) and writes
 * bench/results/fuzz-bodies.json with its command. Exit status 1 on a mismatch, hang or plugin-server respawn.
 *
 *   npm run bench:fuzz:bodies -- --bodies 10000 --seed 7
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { packageRoot } from '../kong/stand-in/index.js';
import { benchArgs, numberArg, orUsage } from './lib/cli.js';
import { runBodyFuzz, type Worst } from './lib/body-fuzz/run-body-fuzz.js';

const SCRIPT = 'bench:fuzz:bodies';
const USAGE = `usage: npm run ${SCRIPT} -- [--bodies N] [--seed N] [--concurrency N] [--rare-every N]
                                 [--max-minutes N] [--max-string-mb N] [--many-messages N] [--out FILE]

Sends N seeded fuzz bodies (default 500) through the Kong stand-in with the real kinference plugin server and
straight to an emulated pod, compares the statuses, and measures the plugin server (CPU per request, RSS,
heap after a forced GC). --concurrency: clients at once (default 4; the multi-megabyte cases always go alone).
--rare-every: one multi-megabyte case (10 MB string, 100k messages, in turn) every N cases (default 250;
0: drawn at random, ~2%). --max-minutes: start no case after that long (a busy machine; the report gives
the count not sent). Writes bench/results/fuzz-bodies.json unless --out says otherwise.`;

const args = benchArgs(SCRIPT, USAGE, {
  bodies: { type: 'string' },
  seed: { type: 'string' },
  'max-string-mb': { type: 'string' },
  'many-messages': { type: 'string' },
  concurrency: { type: 'string' },
  'rare-every': { type: 'string' },
  'max-minutes': { type: 'string' },
  out: { type: 'string' },
});
const opts = orUsage(SCRIPT, USAGE, () => ({
  bodies: args.bodies === undefined ? 500 : numberArg('bodies', args.bodies, 'whole ≥ 1'),
  seed: args.seed === undefined ? 1 : numberArg('seed', args.seed, 'whole ≥ 0'),
  maxStringBytes:
    args['max-string-mb'] === undefined
      ? 10 << 20
      : numberArg('max-string-mb', args['max-string-mb'], 'positive') * (1 << 20),
  manyMessages:
    args['many-messages'] === undefined
      ? 100_000
      : numberArg('many-messages', args['many-messages'], 'whole ≥ 1'),
  concurrency: args.concurrency === undefined ? 4 : numberArg('concurrency', args.concurrency, 'whole ≥ 1'),
  rareEvery:
    args['rare-every'] === undefined ? 250 : numberArg('rare-every', args['rare-every'], 'whole ≥ 0'),
  maxMinutes:
    args['max-minutes'] === undefined ? undefined : numberArg('max-minutes', args['max-minutes'], 'positive'),
}));
const out = args.out ?? join(packageRoot(), 'bench', 'results', 'fuzz-bodies.json');

let lastPct = -1;
const report = await runBodyFuzz({
  bodies: opts.bodies,
  seed: opts.seed,
  everyClassFirst: true,
  concurrency: opts.concurrency,
  ...(opts.maxMinutes === undefined ? {} : { maxSeconds: opts.maxMinutes * 60 }),
  caseOptions: {
    maxStringBytes: opts.maxStringBytes,
    manyMessages: opts.manyMessages,
    ...(opts.rareEvery > 0 ? { rareEvery: opts.rareEvery } : {}),
  },
  onCase: process.env.KINF_FUZZ_TRACE
    ? (c, r) =>
        process.stderr.write(
          `#${c.index} ${c.cls} ${c.body.length} B: gateway ${r.gateway}, direct ${r.direct}, cpu ${Math.round(r.cpuMs)} ms, rss ${r.rssMiB} MiB\n`,
        )
    : undefined,
  onProgress: (done, total) => {
    const pct = Math.floor((done * 100) / total);
    if (pct !== lastPct && pct % 10 === 0) process.stderr.write(`${SCRIPT}: ${done}/${total}\n`);
    lastPct = pct;
  },
});

const m = report.memory;
console.log(
  `${SCRIPT}: seed ${report.seed}, ${report.bodies} bodies in ${report.durationS} s, ${report.concurrency} clients, load average ${loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')}`,
);
if (report.notSent) console.log(`  NOT SENT    ${report.notSent} cases: --max-minutes reached`);
console.log(
  `  classes     ${Object.entries(report.byClass)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ')}`,
);
console.log(
  `  statuses    ${Object.entries(report.statuses)
    .map(([k, v]) => `${k}: ${v}`)
    .join(', ')}`,
);
console.log(
  `  mismatches  ${report.mismatches.length}${report.mismatches.length ? ` ${JSON.stringify(report.mismatches.slice(0, 10))}` : ''}`,
);
console.log(
  `  hangs       ${report.hangs}; plugin server spawns ${report.pluginServerSpawns}; gateway errors ${report.gatewayErrors.count}${report.gatewayErrors.count ? ` ${JSON.stringify(report.gatewayErrors.first.slice(0, 3))}` : ''}`,
);
const w = (x: Worst): string =>
  `${x.ms} ms (#${x.index}, ${x.cls}, ${x.bytes} B${x.alone ? ', alone' : ', upper bound'})`;
console.log(
  `  worst CPU   ${w(report.worstCpuMs)}; alone ${w(report.worstAloneCpuMs)}; event loop ${w(report.worstLoopCpuMs)}; mean ${report.meanCpuMs} ms/body`,
);
console.log(
  `  worst wall  ${report.worstWallMs.ms} ms (#${report.worstWallMs.index}, ${report.worstWallMs.cls})`,
);
for (const [k, v] of Object.entries(report.cpuByClass))
  console.log(
    `  ${k.padEnd(20)} n ${v.n}, CPU mean ${v.meanCpuMs} ms, max ${v.maxCpuMs} ms${v.alone ? '' : ' (upper bound)'} (loop ${v.maxLoopMs}), largest ${v.maxBytes} B, wall max ${v.maxWallMs} ms`,
  );
console.log(
  `  RSS MiB     start ${m.start.rssMiB}, after warm-up ${m.afterWarmup.rssMiB}, peak ${m.peak.rssMiB} (#${m.peak.index}, ${m.peak.cls}), after run ${m.afterRun.rssMiB}, after forced GC ${m.afterGc.rssMiB} (heap used ${m.afterGc.heapUsedMiB}, heap total ${m.afterGc.heapTotalMiB}, external ${m.afterGc.externalMiB}, array buffers ${m.afterGc.arrayBuffersMiB})`,
);
console.log(`  plugin      ${JSON.stringify(report.pluginState)}`);
mkdirSync(join(out, '..'), { recursive: true });
const command = `npm run ${SCRIPT} -- ${process.argv.slice(2).join(' ')}`.trim();
writeFileSync(
  out,
  `${JSON.stringify({ command, at: new Date().toISOString(), loadAverage: loadavg(), ...report }, null, 2)}\n`,
);
console.log(`  wrote ${out}`);
if (
  report.mismatches.length > 0 ||
  report.hangs > 0 ||
  report.pluginServerSpawns !== 1 ||
  report.gatewayErrors.count > 0
)
  process.exitCode = 1;
