// runFrameFuzz: a seeded frame fuzz against a real collector, ZeroMQ and Redis, and its report.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { blockKeys, keySeed } from '../../../src/core/block-keys.js';
import { createKvIndex } from '../../../src/index/index.js';
import { freeLoopbackPort, startRedisServer } from '../../../harness/redis-server.js';
import { Rng } from '../rng.js';
import { CollectorProcess, type Metrics } from './collector-process.js';
import {
  BS,
  FRAME_MUTATIONS,
  FrameSource,
  PAYLOAD_MUTATIONS,
  type FrameMutation,
  type PayloadMutation,
} from './frames.js';
import { FuzzPublisher, seqFrame } from './publisher.js';

export interface FrameFuzzOptions {
  seed: number;
  /**
   * fuzz: `frames` frames, each a valid batch or (most) a mutation of any class; storm: after `preload` valid
   * batches, `frames` forged frames that look like an engine restart or a sequence jump, among valid ones.
   */
  mode?: 'fuzz' | 'storm';
  frames: number;
  /** Valid batches published (and ingested) before the fuzz starts. Default 50 (fuzz), 1000 (storm). */
  preload?: number;
  /** Frames per second sent (default 2000). */
  rate?: number;
  /** The engine's replay buffer (vLLM buffer_steps), default 10,000. */
  bufferSteps?: number;
  /** How long the collector may take to settle after the last frame, ms (default 120,000). */
  settleTimeoutMs?: number;
  /** Progress lines (default: none). */
  log?: (line: string) => void;
}

export interface FrameFuzzReport {
  seed: number;
  mode: 'fuzz' | 'storm';
  framesSent: number;
  /** Frames sent by class: valid, and each mutation. */
  sentByKind: Record<string, number>;
  validBatches: number;
  collector: {
    alive: boolean;
    exit: { code: number | null; signal: string | null } | null;
    healthz: number | null;
    stderrTail: string;
  };
  /** What the collector counted as rejected, by metric and reason. */
  rejected: Record<string, Record<string, number>>;
  replays: {
    /** Replay requests the engine's ROUTER answered. */
    served: number;
    /** Batches it sent in them. */
    servedBatches: number;
    byResult: Record<string, number>;
    /** The collector's own replay-control counters (absent before they existed). */
    control: Record<string, Record<string, number>>;
    podClears: Record<string, number>;
  };
  /** From the first fuzz frame until the collector has caught up and stayed so for 1 s (null: it did not). */
  settleMs: number | null;
  sendMs: number;
  memory: { rssBeforeMb: number | null; peakRssMb: number | null; rssAfterMb: number | null };
  /** The index against the model of the valid events (null when the collector died first). */
  index: {
    chains: number;
    blocks: number;
    matching: number;
    mismatches: number;
    /**
     * Chains the index credits with more blocks than the pod holds: false credit, always a defect. The other
     * mismatches credit fewer (blocks lost after a pod clear: a cost in cache hits, never a wrong route).
     */
    overClaims: number;
    example: string | null;
    overClaimExample: string | null;
  } | null;
}

const MODEL = 'fuzz/model';

/**
 * Seeded fuzz of the KV-event frames a collector reads: a real redis-server, a real `kinference collector`
 * child process, and a vLLM-like publisher (PUB + replay ROUTER) sending valid batches and mutated frames
 * over real ZeroMQ. Reports whether the collector stayed up and healthy, what it rejected, its replays,
 * how long it took to settle, its peak RSS, and whether the index equals the model of the valid events.
 */
export async function runFrameFuzz(o: FrameFuzzOptions): Promise<FrameFuzzReport> {
  const mode = o.mode ?? 'fuzz';
  const log = o.log ?? (() => {});
  const rng = new Rng(o.seed);
  const src = new FrameSource(rng);
  const redis = await startRedisServer();
  const dir = mkdtempSync(join(tmpdir(), 'kinf-fuzz-frames-'));
  const topic = 'kv';
  const pub = new FuzzPublisher(
    `tcp://127.0.0.1:${await freeLoopbackPort()}`,
    `tcp://127.0.0.1:${await freeLoopbackPort()}`,
    topic,
    o.bufferSteps ?? 10_000,
  );
  await pub.bind();
  const listen = `127.0.0.1:${await freeLoopbackPort()}`;
  const config = join(dir, 'fleet.yaml');
  writeFileSync(
    config,
    [
      `redis_url: ${redis.url}`,
      'redis_key_prefix: fuzz',
      'models:',
      `  ${MODEL}: { tokenizer: "tiktoken:o200k_base", chat_template: chatml, block_size: ${BS} }`,
      'pods:',
      '  - id: pod-f',
      `    model: ${MODEL}`,
      '    address: 127.0.0.1:18777',
      `    kv_events: ${pub.endpoint}`,
      `    kv_events_replay: ${pub.replayEndpoint}`,
      `    kv_events_topic: ${topic}`,
      'collector:',
      `  listen: ${listen}`,
      '  log_level: warn',
    ].join('\n'),
  );
  const collector = new CollectorProcess(config, listen);
  // The check reads thousands of chains from a Redis the collector keeps busy: no 25 ms router budget.
  const index = createKvIndex({ kind: 'redis', url: redis.url, keyPrefix: 'fuzz', lookupTimeoutMs: 5000 });
  const sentByKind: Record<string, number> = {};
  const count = (k: string): void => void (sentByKind[k] = (sentByKind[k] ?? 0) + 1);
  let framesSent = 0;
  let validBatches = 0;
  let settleMs: number | null = null;
  try {
    // Up: /metrics answers and the stream has seen the engine (probe batches until one is ingested).
    await until(
      'the collector to serve /metrics',
      60_000,
      async () => collector.alive && (await collector.metrics()) !== null,
      collector,
    );
    await until(
      'the collector to ingest a first batch',
      30_000,
      async () => {
        const m = await collector.metrics();
        if (m && m.sum('kinference_collector_batches_total') > 0) return true;
        await pub.publish(src.validBatch());
        validBatches++;
        return false;
      },
      collector,
    );
    const preload = o.preload ?? (mode === 'storm' ? 1000 : 50);
    for (let i = 0; i < preload; i++) {
      await pub.publish(src.validBatch());
      validBatches++;
      if (i % 200 === 199) await pause(1);
    }
    await settled(collector, pub, 60_000);
    const rssBeforeMb = collector.memory()?.rssMb ?? null;
    log(`preloaded ${validBatches} batches; collector RSS ${rssBeforeMb?.toFixed(0)} MB`);

    const rate = o.rate ?? 2000;
    const t0 = performance.now();
    for (let i = 0; i < o.frames && collector.alive; i++) {
      const kind = pickKind(mode, rng);
      count(kind);
      framesSent++;
      if (kind === 'valid') {
        await pub.publish(src.validBatch());
        validBatches++;
      } else if ((PAYLOAD_MUTATIONS as readonly string[]).includes(kind))
        await pub.publish(src.mutatedPayload(kind as PayloadMutation));
      else await pub.sendRaw(forged(kind as FrameMutation, src, pub, rng, topic));
      // Paced: the fuzz is about content, not about overrunning the SUB socket's high-water mark.
      const due = t0 + ((i + 1) * 1000) / rate;
      const wait = due - performance.now();
      if (wait >= 1) await pause(wait);
      if (i % 1000 === 999) log(`${i + 1} frames sent; collector ${collector.alive ? 'up' : 'DOWN'}`);
    }
    // The engine goes on: one more valid batch, so a collector left behind a forged number must repair.
    if (collector.alive) {
      await pub.publish(src.validBatch());
      validBatches++;
    }
    const sendMs = performance.now() - t0;
    const s = await settled(collector, pub, o.settleTimeoutMs ?? 120_000).catch(() => null);
    if (s !== null) settleMs = s - t0;
    log(
      settleMs === null
        ? 'collector did not settle'
        : `settled ${(settleMs / 1000).toFixed(1)} s after the first frame`,
    );
    const last = await collector.metrics();
    const indexCheck = collector.alive ? await checkIndex(index, src).catch(() => null) : null;
    const healthz = await collector.healthz();
    const mem = collector.memory();
    return {
      seed: o.seed,
      mode,
      framesSent,
      sentByKind,
      validBatches,
      collector: {
        alive: collector.alive,
        exit: collector.alive ? null : collector.exit,
        healthz,
        stderrTail: collector.stderr.slice(-4000),
      },
      rejected: last ? rejected(last) : {},
      replays: {
        served: pub.replayRequests,
        servedBatches: pub.replayedBatches,
        byResult: last?.by('kinference_collector_replays_total', 'result') ?? {},
        control: last
          ? {
              requested: { all: last.sum('kinference_collector_replays_requested_total') },
              coalesced: { all: last.sum('kinference_collector_replays_coalesced_total') },
              refused: last.by('kinference_collector_replays_refused_total', 'reason'),
            }
          : {},
        podClears: last?.by('kinference_collector_pod_clears_total', 'reason') ?? {},
      },
      settleMs,
      sendMs,
      memory: { rssBeforeMb, peakRssMb: mem?.peakRssMb ?? null, rssAfterMb: mem?.rssMb ?? null },
      index: indexCheck,
    };
  } finally {
    await collector.stop();
    await index.close();
    await pub.close();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

function pickKind(mode: 'fuzz' | 'storm', rng: Rng): string {
  if (mode === 'storm') return rng.next() < 1 / 3 ? 'valid' : rng.pick(['restart_look', 'seq_jump']);
  if (rng.next() < 0.4) return 'valid';
  return rng.pick([...PAYLOAD_MUTATIONS, ...FRAME_MUTATIONS]);
}

function forged(
  kind: FrameMutation,
  src: FrameSource,
  pub: FuzzPublisher,
  rng: Rng,
  topic: string,
): Buffer[] {
  const t = Buffer.from(topic);
  const last = Math.max(0, pub.seq - 1);
  switch (kind) {
    case 'frame_count': {
      const n = rng.pick([1, 2, 4, 5]);
      return [t, seqFrame(pub.seq), src.junkBatch(), Buffer.from('x'), Buffer.alloc(0)].slice(0, n);
    }
    case 'seq_frame': {
      const bad = rng.pick([
        Buffer.alloc(7),
        Buffer.alloc(9),
        Buffer.alloc(0),
        Buffer.alloc(8, 0xff),
        seqFrame(2n ** 53n),
      ]);
      return [t, bad, src.junkBatch()];
    }
    case 'seq_jump': {
      const k = rng.pick([2, 10, 1000, 1_000_000, Number.MAX_SAFE_INTEGER - pub.seq - 1]);
      return [t, seqFrame(pub.seq + k), src.junkBatch()];
    }
    case 'restart_look':
      // Other bytes under a number the engine already used, as only a new engine process would send.
      return [t, seqFrame(rng.pick([0, rng.int(last + 1), last])), src.junkBatch()];
  }
}

function rejected(m: Metrics): Record<string, Record<string, number>> {
  const out: Record<string, Record<string, number>> = {
    malformed_frames: { all: m.sum('kinference_collector_malformed_frames_total') },
    decode_errors: m.by('kinference_collector_decode_errors_total', 'reason'),
    invalid_events: m.by('kinference_collector_invalid_events_total', 'reason'),
    unknown_events: { all: m.sum('kinference_collector_unknown_events_total') },
    internal_errors: m.by('kinference_collector_internal_errors_total', 'stage'),
    out_of_order: { all: m.sum('kinference_collector_out_of_order_batches_total') },
    unconfirmed: { all: m.sum('kinference_collector_unconfirmed_batches_total') },
    restarts: { all: m.sum('kinference_collector_restarts_total') },
  };
  return out;
}

/**
 * Caught up: the last number the engine published is the last the collector ingested, nothing resyncing or
 * queued, and no replay ran for a second. Returns when (performance.now()).
 */
async function settled(c: CollectorProcess, pub: FuzzPublisher, timeoutMs: number): Promise<number> {
  let since: number | null = null;
  let replayed = -1;
  return until(
    'the collector to settle',
    timeoutMs,
    async () => {
      const m = await c.metrics();
      if (!m) return false;
      const r =
        m.sum('kinference_collector_replayed_batches_total') + m.sum('kinference_collector_replays_total');
      const ok =
        m.sum('kinference_collector_last_sequence') === pub.seq - 1 &&
        m.sum('kinference_collector_resyncing') === 0 &&
        m.sum('kinference_collector_queue_ops') === 0 &&
        r === replayed;
      replayed = r;
      const now = performance.now();
      if (!ok) since = null;
      else if (since === null) since = now;
      else if (now - since >= 1000) return since;
      return false;
    },
    c,
    100,
  );
}

async function until<T>(
  what: string,
  timeoutMs: number,
  check: () => Promise<T | false>,
  c: CollectorProcess,
  everyMs = 50,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (!c.alive) throw new Error(`the collector exited (${JSON.stringify(c.exit)}) waiting for ${what}`);
    const v = await check();
    if (v !== false) return v;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await pause(everyMs);
  }
}

const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Every chain of the model, looked up as the router would: its cached prefix on the fuzzed pod. */
async function checkIndex(
  index: ReturnType<typeof createKvIndex>,
  src: FrameSource,
): Promise<NonNullable<FrameFuzzReport['index']>> {
  const seed = keySeed({ model: MODEL, lora: null, cacheSalt: null });
  let blocks = 0;
  let matching = 0;
  let example: string | null = null;
  let overClaims = 0;
  let overClaimExample: string | null = null;
  for (const [i, c] of src.chains.entries()) {
    const want = c.hashes.length;
    blocks += want;
    const r = await index.lookup(MODEL, blockKeys(c.tokens, BS, seed));
    const got = r.pods.find((p) => p.state.podId === 'pod-f')?.prefixBlocks.GPU ?? 0;
    if (got === want) matching++;
    else example ??= `chain ${i}: index ${got} blocks, model ${want}`;
    if (got > want) {
      overClaims++;
      overClaimExample ??= `chain ${i}: index ${got} blocks, model ${want}`;
    }
  }
  return {
    chains: src.chains.length,
    blocks,
    matching,
    mismatches: src.chains.length - matching,
    overClaims,
    example,
    overClaimExample,
  };
}
