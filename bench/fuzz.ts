// bench:fuzz — the two seeded fuzzes of bad input in one run: KV-event frames, then chat bodies.
/**
 * `npm run bench:fuzz -- --frames 12000 --bodies 10000 --seed 7` runs the frame fuzz (bench/fuzz-frames.ts:
 * mutated KV-event frames against a real collector, ZeroMQ and Redis) and then the body fuzz
 * (bench/fuzz-bodies.ts: mutated chat bodies through the Kong stand-in + the real plugin server and straight
 * to an emulated pod), prints both summaries and writes bench/results/fuzz.json with its command. Exit status 1
 * when either finds a defect: a dead or unhealthy collector, an index that differs from the model of the valid
 * events, a status the gateway answers differently from the pod, a hang, a plugin-server respawn or an error
 * the gateway logged. The short seeded runs are specs (frame-fuzz.spec.ts, body-fuzz.spec.ts).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { benchArgs, numberArg, orUsage } from './lib/cli.js';
import { runBodyFuzz, type BodyFuzzReport } from './lib/body-fuzz/run-body-fuzz.js';
import { runFrameFuzz, type FrameFuzzReport } from './lib/frame-fuzz/run.js';

const SCRIPT = 'bench:fuzz';
const USAGE = `usage: npm run ${SCRIPT} -- [--frames N] [--bodies N] [--seed N] [--concurrency N] [--rare-every N] [--out FILE]

Runs the frame fuzz (N frames, default 12000) against a real collector, then the body fuzz (N bodies, default
10000) through the Kong stand-in and the real plugin server, with one seed (default 1), by --concurrency
clients (default 8; the multi-megabyte cases go alone), one 10 MB string or 100k-message body every
--rare-every cases (default 1000). Each alone: bench:fuzz:frames, bench:fuzz:bodies. Writes
bench/results/fuzz.json unless --out says otherwise.`;

const args = benchArgs(SCRIPT, USAGE, {
  frames: { type: 'string' },
  bodies: { type: 'string' },
  seed: { type: 'string' },
  concurrency: { type: 'string' },
  'rare-every': { type: 'string' },
  out: { type: 'string' },
});
const opts = orUsage(SCRIPT, USAGE, () => ({
  frames: args.frames === undefined ? 12_000 : numberArg('frames', args.frames, 'whole ≥ 1'),
  bodies: args.bodies === undefined ? 10_000 : numberArg('bodies', args.bodies, 'whole ≥ 1'),
  seed: args.seed === undefined ? 1 : numberArg('seed', args.seed, 'whole ≥ 0'),
  concurrency: args.concurrency === undefined ? 8 : numberArg('concurrency', args.concurrency, 'whole ≥ 1'),
  rareEvery:
    args['rare-every'] === undefined ? 1000 : numberArg('rare-every', args['rare-every'], 'whole ≥ 0'),
}));
const out = args.out ?? 'bench/results/fuzz.json';

/** What a frame fuzz run found wrong, in words (empty: nothing). */
function frameDefects(r: FrameFuzzReport): string[] {
  const d: string[] = [];
  if (!r.collector.alive) d.push(`collector died (${JSON.stringify(r.collector.exit)})`);
  else if (r.collector.healthz !== 200) d.push(`collector /healthz ${r.collector.healthz}`);
  if (r.index && r.index.mismatches > 0)
    d.push(
      `${r.index.mismatches} chains differ from the model of the valid events (${r.index.overClaims} with false credit)`,
    );
  if (r.settleMs === null) d.push('collector did not settle');
  return d;
}

function bodyDefects(r: BodyFuzzReport): string[] {
  const d: string[] = [];
  if (r.mismatches.length) d.push(`${r.mismatches.length} statuses differ from the pod's`);
  if (r.hangs) d.push(`${r.hangs} hangs`);
  if (r.pluginServerSpawns !== 1) d.push(`plugin server spawned ${r.pluginServerSpawns} times`);
  if (r.gatewayErrors.count) d.push(`${r.gatewayErrors.count} gateway errors`);
  return d;
}

const started = Date.now();
const loadStart = loadavg();
console.error(`${SCRIPT}: frames: ${opts.frames}, seed ${opts.seed}`);
const frames = await runFrameFuzz({ frames: opts.frames, seed: opts.seed, log: (l) => console.error(l) });
const fd = frameDefects(frames);
console.log(
  `${SCRIPT}: frames ${frames.framesSent} (${frames.validBatches} valid batches), rejected ${JSON.stringify(frames.rejected)}, ` +
    `replays served ${frames.replays.served}, settle ${frames.settleMs} ms, peak RSS ${frames.memory.peakRssMb} MB: ` +
    (fd.length ? `DEFECTS: ${fd.join('; ')}` : 'no defect'),
);

console.error(`${SCRIPT}: bodies: ${opts.bodies}, seed ${opts.seed}`);
let lastPct = -1;
const bodies = await runBodyFuzz({
  bodies: opts.bodies,
  seed: opts.seed,
  everyClassFirst: true,
  concurrency: opts.concurrency,
  caseOptions: opts.rareEvery > 0 ? { rareEvery: opts.rareEvery } : {},
  onProgress: (done, total) => {
    const pct = Math.floor((done * 100) / total);
    if (pct !== lastPct && pct % 10 === 0) console.error(`${SCRIPT}: bodies ${done}/${total}`);
    lastPct = pct;
  },
});
const bd = bodyDefects(bodies);
const m = bodies.memory;
console.log(
  `${SCRIPT}: bodies ${bodies.bodies} (${JSON.stringify(bodies.byClass)}), statuses ${JSON.stringify(bodies.statuses)}, ` +
    `worst CPU ${bodies.worstCpuMs.ms} ms (${bodies.worstCpuMs.cls}, ${bodies.worstCpuMs.bytes} B${bodies.worstCpuMs.alone ? ', alone' : ', upper bound'}), ` +
    `event loop ${bodies.worstLoopCpuMs.ms} ms (${bodies.worstLoopCpuMs.cls}), mean ${bodies.meanCpuMs} ms/body, plugin-server RSS ${m.start.rssMiB} → ${m.afterWarmup.rssMiB} (warm) → peak ${m.peak.rssMiB} → ` +
    `${m.afterGc.rssMiB} MiB after GC: ${bd.length ? `DEFECTS: ${bd.join('; ')}` : 'no defect'}`,
);

const command = `npm run ${SCRIPT} -- ${process.argv.slice(2).join(' ')}`.trim();
mkdirSync('bench/results', { recursive: true });
writeFileSync(
  out,
  `${JSON.stringify(
    {
      command,
      at: new Date().toISOString(),
      loadAverage: { start: loadStart, end: loadavg() },
      durationS: Math.round((Date.now() - started) / 1000),
      defects: { frames: fd, bodies: bd },
      frames: {
        ...frames,
        collector: { ...frames.collector, stderrTail: frames.collector.stderrTail.slice(-500) },
      },
      bodies,
    },
    null,
    2,
  )}\n`,
);
console.log(`${SCRIPT}: wrote ${out}`);
if (fd.length || bd.length) process.exitCode = 1;
