import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KvIndex } from '../../../src/index/index.js';
import { blockKeys, keySeed } from '../../../src/core/block-keys.js';
import { packEntry } from '../../../src/index/lua/entry.js';
import { SCRIPTS } from '../../../src/index/redis-scripts.js';
import {
  appliedKey,
  blockRedisKey,
  modelKeyBase,
  podsKey,
  writerLeaseKey,
} from '../../../src/index/redis-keys.js';
import {
  LEASE_SCRIPTS,
  RedisWriterLease,
  parseLeaseHolder,
  type LeaseHolder,
} from '../../../src/index/writer-lease.js';
import { freePort, waitFor } from '../../helpers/ports.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';
import { FakeVllmPublisher } from '../../helpers/collector/fake-publisher.js';
import {
  BS,
  MODEL,
  freshTokens,
  hashCounter,
  waitCached,
} from '../../helpers/collector/collector-harness.js';
import { observerIndex } from '../../helpers/observer-index.js';

/** A collector process's start (tsx, imports, lease): tens of seconds on a loaded 2-core CI host. */
const START_MS = 45_000;

/**
 * One writer per model (docs/collector.md, "One writer per model: the writer lease"): two real
 * `kinference collector` processes on one fleet, one Redis, one key prefix. The second stands by, takes
 * over when the first stops, and a collector whose lease is taken from it exits 1; a collector frozen past
 * its lease cannot write at all once it wakes (the fence).
 */
const PREFIX = 'kwl';
const TTL_MS = 1500;
const POD = 'pod-w';

interface LogLine {
  level: string;
  msg: string;
  [k: string]: unknown;
}

/** A collector child process, its log lines (JSON on stderr) and its exit. */
class CollectorProc {
  readonly proc: ChildProcess;
  readonly exited: Promise<number | null>;
  #stderr = '';

  constructor(
    readonly config: string,
    readonly listen: string,
  ) {
    this.proc = spawn(process.execPath, ['--import', 'tsx', 'cli/main.ts', 'collector', '--config', config], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    this.proc.stderr!.on('data', (d: Buffer) => (this.#stderr += d.toString()));
    this.exited = new Promise((r) => this.proc.once('exit', (code) => r(code)));
  }

  get pid(): number {
    return this.proc.pid!;
  }

  lines(): LogLine[] {
    return this.#stderr
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as LogLine);
  }

  async health(): Promise<{ status: number; body: Record<string, unknown> }> {
    const r = await fetch(`http://${this.listen}/healthz`);
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  }

  async metrics(): Promise<string> {
    return (await fetch(`http://${this.listen}/metrics`)).text();
  }

  async kill(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill('SIGKILL');
    await this.exited;
  }
}

/** The value of the pod's series `kinference_collector_<name>{pod, <label>}` in a /metrics text; -1 if absent. */
function podMetric(text: string, name: string, label: string): number {
  const m = new RegExp(`^kinference_collector_${name}\\{pod="${POD}",${label}\\} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : -1;
}

/** Index losses the collector counted (kinference_collector_index_lost_total), all reasons. */
/**
 * A one-pod fleet file for a collector CLI: the pod's events from `pub`, a free listen port, the writer lease
 * at `ttlMs`, and fast index retries.
 */
async function writeFleet(
  config: string,
  o: {
    redisUrl: string;
    prefix: string;
    pub: FakeVllmPublisher;
    ttlMs: number;
    address?: string;
    /** More lines of the `collector:` section. */
    collector?: string[];
  },
): Promise<{ config: string; listen: string }> {
  const listen = `127.0.0.1:${await freePort()}`;
  writeFileSync(
    config,
    [
      `redis_url: ${o.redisUrl}`,
      `redis_key_prefix: ${o.prefix}`,
      'models:',
      `  ${MODEL}: { tokenizer: "tiktoken:o200k_base", chat_template: chatml, block_size: ${BS} }`,
      'pods:',
      `  - id: ${POD}`,
      `    model: ${MODEL}`,
      `    address: ${o.address ?? '127.0.0.1:18097'}`,
      `    kv_events: ${o.pub.endpoint}`,
      `    kv_events_replay: ${o.pub.replayEndpoint}`,
      '    kv_events_topic: kv',
      'collector:',
      `  listen: ${listen}`,
      `  writer_lease_ms: ${o.ttlMs}`,
      '  index_retry_min_ms: 20',
      '  index_retry_max_ms: 200',
      ...(o.collector ?? []).map((l) => `  ${l}`),
      '',
    ].join('\n'),
  );
  return { config, listen };
}

/** Probes until the collector has ingested a batch of the pod (ZMQ slow joiner), never a sleep. */
async function waitIngesting(c: CollectorProc, pub: FakeVllmPublisher): Promise<void> {
  await waitFor(
    `collector ${c.pid} ingesting`,
    async () => {
      if (new RegExp(`kinference_collector_batches_total\\{pod="${POD}"\\} [1-9]`).test(await c.metrics()))
        return true;
      await pub.publish([]);
      return false;
    },
    15_000,
    50,
  );
}

/** The pod's packed entry (GPU refcount and epoch) in each block of `tokens` (null: none), straight from Redis. */
async function rawEntries(redis: TestRedis, base: string, tokens: number[]): Promise<(number | null)[]> {
  const idx = (await redis.client.hget(podsKey(base), POD))!.split(':')[0];
  const keys = blockKeys(tokens, BS, keySeed({ model: MODEL, lora: null, cacheSalt: null }));
  return Promise.all(
    keys.map(async (k) => {
      const v = await redis.client.get(blockRedisKey(base, Buffer.from(k, 'hex')));
      const entry = v?.split(',').find((e) => e.startsWith(`${idx}=`));
      return entry === undefined ? null : Number(entry.split('=')[1]);
    }),
  );
}

async function holderIn(redis: TestRedis, leaseKey: string): Promise<LeaseHolder | null> {
  const v = await redis.client.get(leaseKey);
  return v === null ? null : parseLeaseHolder(v);
}

function indexLosses(metrics: string): number {
  let n = 0;
  for (const m of metrics.matchAll(/^kinference_collector_index_lost_total\{[^}]*\} (\d+)/gm))
    n += Number(m[1]);
  return n;
}

describe('writer lease: two `kinference collector` processes on one fleet (real Redis, real processes)', () => {
  let redis: TestRedis;
  let index: KvIndex;
  let pub: FakeVllmPublisher;
  let dir: string;
  let a: CollectorProc;
  let b: CollectorProc;
  const base = modelKeyBase(PREFIX, MODEL);
  const leaseKey = writerLeaseKey(base);
  const hashes = hashCounter(1n << 40n);
  let early: { tokens: number[]; hashes: bigint[] };

  const fleetFile = (name: string): Promise<{ config: string; listen: string }> =>
    writeFleet(join(dir, `${name}.yaml`), { redisUrl: redis.url, prefix: PREFIX, pub, ttlMs: TTL_MS });

  beforeAll(async () => {
    redis = await startRedis();
    index = observerIndex({ kind: 'redis', url: redis.url, keyPrefix: PREFIX });
    pub = await new FakeVllmPublisher({ format: 'map' }, { topic: 'kv' }).bind();
    dir = mkdtempSync(join(tmpdir(), 'kinf-lease-'));
  });

  afterAll(async () => {
    await Promise.all([a?.kill(), b?.kill()]);
    await pub?.close();
    await index?.close();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('a second collector stands by: 503 with standby and the holder, gauge 1, one warning; nothing counted twice', async () => {
    // Both started at once (and faster than one after the other): exactly one may win.
    const [f1, f2] = await Promise.all([fleetFile('one'), fleetFile('two')]);
    const one = new CollectorProc(f1.config, f1.listen);
    const two = new CollectorProc(f2.config, f2.listen);
    [a, b] = [one, two]; // afterAll kills both, whatever happens next
    const holderPid = await waitFor(
      'a lease holder',
      async () => (await holderIn(redis, leaseKey))?.pid,
      START_MS,
      50,
    );
    [a, b] = holderPid === one.pid ? [one, two] : [two, one];
    expect(a.pid).toBe(holderPid);
    await waitFor('collector A healthy', async () => (await a.health()).status === 200, START_MS, 50);
    await waitIngesting(a, pub);
    const aHolder = await holderIn(redis, leaseKey);
    expect(aHolder).toMatchObject({ pid: a.pid });

    const standby = await waitFor(
      'collector B standing by',
      async () => {
        const r = await b.health();
        return r.body.standby === true ? r : null;
      },
      START_MS,
      50,
    );
    expect(standby.status).toBe(503);
    expect(standby.body).toMatchObject({ ok: false, standby: true, holder: aHolder, streams: [] });
    expect(await b.metrics()).toMatch(/^kinference_collector_standby 1$/m);
    expect(await b.metrics()).toMatch(/^kinference_collector_writer_lease_held 0$/m);
    expect(await a.metrics()).toMatch(/^kinference_collector_standby 0$/m);
    expect(await a.metrics()).toMatch(/^kinference_collector_writer_lease_held 1$/m);
    const warnings = b.lines().filter((l) => l.level === 'warn' && l.msg.includes('standing by'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.msg).toContain(`pid ${a.pid}`);
    expect(warnings[0]).toMatchObject({ models: [MODEL], holder: aHolder });

    // Each block stored once is counted once (a second writer would make it 2, or clear and rebuild the
    // pod: its first write is a clear, and then each sees the other's writes as `overwritten`).
    const tokens = freshTokens(3);
    early = { tokens, hashes: hashes(3) };
    await pub.publish([{ type: 'BlockStored', hashes: early.hashes, parent: null, tokens, blockSize: BS }]);
    await waitCached(index, POD, tokens, 3);
    const epoch = Number((await redis.client.hget(podsKey(modelKeyBase(PREFIX, MODEL)), POD))!.split(':')[1]);
    expect(await rawEntries(redis, base, tokens)).toEqual([1, 1, 1].map(() => packEntry([1, 0, 0], epoch)));
    await pub.publish([{ type: 'BlockRemoved', hashes: [early.hashes[2]!] }]);
    await waitCached(index, POD, tokens, 2);
    // B's retries (every ttl/3) went on throughout: it still follows nothing, and A lost nothing to it.
    expect((await b.health()).body).toMatchObject({ standby: true, streams: [] });
    expect(await b.metrics()).not.toMatch(/kinference_collector_batches_total\{/);
    expect(indexLosses(await a.metrics())).toBe(0);
    expect(await holderIn(redis, leaseKey)).toEqual(aHolder);
  }, 150_000); // two collector processes start one after the other: slow on a busy 2-core machine

  it('SIGTERM the active one: it releases the lease, and the standby takes over and keeps the index current', async () => {
    const aExit = a.exited;
    a.proc.kill('SIGTERM');
    expect(await aExit).toBe(0);
    const t0 = Date.now();
    await waitFor('collector B active', async () => (await b.health()).status === 200, 15_000, 50);
    const tookMs = Date.now() - t0;
    // Released on a clean stop: B's next try (every ttl/3) takes it, plus B's own start-up of the pod.
    expect(tookMs).toBeLessThan(TTL_MS + 1500);
    expect(a.lines().some((l) => l.msg === 'writer lease released')).toBe(true);
    const acquired = b.lines().find((l) => l.msg === 'writer lease acquired');
    expect(acquired).toMatchObject({ takeover: true, previousHolder: { pid: a.pid } });
    expect(await holderIn(redis, leaseKey)).toMatchObject({ pid: b.pid });
    expect((await b.health()).body).toMatchObject({ ok: true, standby: false });
    expect(await b.metrics()).toMatch(/^kinference_collector_standby 0$/m);

    // A left its handoff, and B went on from it instead of clearing the pod: what A had written holds…
    expect(a.lines().some((l) => l.msg === 'handoff saved for the next collector')).toBe(true);
    await waitCached(index, POD, early.tokens, 2);
    await waitFor(
      'B resumed',
      async () => podMetric(await b.metrics(), 'handoff_takes_total', 'result="resumed"') === 1,
      10_000,
      50,
    );
    expect(podMetric(await b.metrics(), 'pod_clears_total', 'reason="start"')).toBe(0);
    // …and new traffic reaches the index through B.
    await waitIngesting(b, pub);
    const tokens = freshTokens(4);
    await pub.publish([{ type: 'BlockStored', hashes: hashes(4), parent: null, tokens, blockSize: BS }]);
    await waitCached(index, POD, tokens, 4);
    // The takeover is not a lost write.
    expect(indexLosses(await b.metrics())).toBe(0);
    expect(b.lines().filter((l) => l.level === 'error')).toEqual([]);
  });

  it('Redis restarted empty: the active collector keeps going and takes its lease back', async () => {
    await redis.restart();
    await waitFor(
      'lease taken back',
      async () => (await holderIn(redis, leaseKey))?.pid === b.pid,
      10_000,
      50,
    );
    expect(b.proc.exitCode).toBeNull();
    await waitFor(
      'taken-back warning',
      () => b.lines().some((l) => l.msg.startsWith('writer lease was gone from Redis')),
      5000,
    );
    await waitFor('collector B healthy again', async () => (await b.health()).status === 200, 10_000, 50);
  });

  it('a lease taken from it: the active collector logs who has it and exits 1 within about ttl/3', async () => {
    const intruder = { id: 'intruder', host: 'elsewhere', pid: 4242 };
    const t0 = Date.now();
    await redis.client.set(leaseKey, JSON.stringify(intruder), 'PX', 60_000);
    expect(await b.exited).toBe(1);
    expect(Date.now() - t0).toBeLessThan(TTL_MS / 3 + 2000);
    const lost = b.lines().find((l) => l.level === 'error' && l.msg.startsWith('writer lease lost'));
    expect(lost?.msg).toContain('intruder (host elsewhere, pid 4242)');
    expect(lost).toMatchObject({ models: [MODEL], holder: intruder });
    // It never touched the other holder's lease.
    expect(await redis.client.get(leaseKey)).toBe(JSON.stringify(intruder));
  });
});

describe('writer lease scripts (real Redis)', () => {
  let redis: TestRedis;
  const leases: RedisWriterLease[] = [];
  const M1 = 'm/one';
  const M2 = 'm/two';
  const M3 = 'm/three';
  const key = (m: string): string => writerLeaseKey(modelKeyBase('klease', m));
  const holder = (id: string): LeaseHolder => ({ id, host: 'test', pid: 1 });
  const lease = (id: string, models: string[], ttlMs = 5000): RedisWriterLease => {
    const l = new RedisWriterLease({
      url: redis.url,
      keyPrefix: 'klease',
      models,
      ttlMs,
      holder: holder(id),
    });
    leases.push(l);
    return l;
  };

  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await Promise.all(leases.map((l) => l.close()));
    await redis?.stop();
  });

  it('acquires all or nothing, and says who holds which', async () => {
    const x = lease('x', [M1, M2]);
    const y = lease('y', [M2, M3]);
    expect(await x.tryAcquire()).toEqual({ acquired: true });
    expect(parseLeaseHolder((await redis.client.get(key(M1)))!)).toEqual(holder('x'));
    const pttl = await redis.client.pttl(key(M2));
    expect(pttl).toBeGreaterThan(4000);
    expect(pttl).toBeLessThanOrEqual(5000);

    const r = await y.tryAcquire();
    expect(r.acquired).toBe(false);
    if (r.acquired) return;
    expect(r.held).toEqual([{ model: M2, holder: holder('x'), expiresInMs: expect.any(Number) }]);
    // M3 was free, yet y took nothing: all or nothing.
    expect(await redis.client.exists(key(M3))).toBe(0);

    // Acquiring again is idempotent for the holder.
    expect(await x.tryAcquire()).toEqual({ acquired: true });
    // With M3 taken by z too, y is told about both holders (models in the fixed, sorted order).
    const z = lease('z', [M3]);
    expect(await z.tryAcquire()).toEqual({ acquired: true });
    const r2 = await y.tryAcquire();
    expect(r2.acquired ? [] : r2.held.map((c) => [c.model, c.holder.id])).toEqual([
      [M3, 'z'],
      [M2, 'x'],
    ]);
    // A partial attempt gives back what it took: w (M1 free after x releases, M3 held by z) takes neither.
    await x.release();
    const w = lease('w', [M1, M3]);
    expect((await w.tryAcquire()).acquired).toBe(false);
    expect(await redis.client.exists(key(M1))).toBe(0);
    await z.release();
  });

  it('renews only its own lease: extends it, takes it back when gone, reports another holder and leaves it', async () => {
    const x = lease('x2', [M1], 3000);
    expect(await x.tryAcquire()).toEqual({ acquired: true });
    await redis.client.pexpire(key(M1), 500);
    expect(await x.renew()).toEqual({ kept: true, retaken: [] });
    expect(await redis.client.pttl(key(M1))).toBeGreaterThan(2000);

    await redis.client.del(key(M1)); // Redis restarted empty, or flushed
    expect(await x.renew()).toEqual({ kept: true, retaken: [M1] });
    expect(parseLeaseHolder((await redis.client.get(key(M1)))!)).toEqual(holder('x2'));

    const other = JSON.stringify(holder('thief'));
    await redis.client.set(key(M1), other, 'PX', 700);
    expect(await x.renew()).toEqual({
      kept: false,
      lost: [{ model: M1, holder: holder('thief'), expiresInMs: expect.any(Number) }],
    });
    expect(await redis.client.get(key(M1))).toBe(other);
    expect(await redis.client.pttl(key(M1))).toBeLessThanOrEqual(700); // not extended either
    // A value this code did not write is still named.
    await redis.client.set(key(M1), 'not-json');
    const r = await x.renew();
    expect(r.kept ? null : r.lost[0]!.holder).toEqual({ id: 'not-json', host: null, pid: null });
    await redis.client.del(key(M1));
  });

  it('releases only its own lease, and reloads its scripts after SCRIPT FLUSH', async () => {
    const x = lease('x3', [M1, M2]);
    expect(await x.tryAcquire()).toEqual({ acquired: true });
    await redis.client.set(key(M2), JSON.stringify(holder('other')));
    await redis.client.script('FLUSH');
    await x.release();
    expect(await redis.client.exists(key(M1))).toBe(0);
    expect(await redis.client.get(key(M2))).toBe(JSON.stringify(holder('other')));
    expect(await redis.client.script('EXISTS', LEASE_SCRIPTS.release.sha1)).toEqual([1]);
    await redis.client.del(key(M2));
  });

  it('expires when not renewed, so a standby can take over', async () => {
    const x = lease('x4', [M3], 200);
    const y = lease('y4', [M3], 200);
    expect(await x.tryAcquire()).toEqual({ acquired: true });
    expect((await y.tryAcquire()).acquired).toBe(false);
    await waitFor('lease expired', async () => (await redis.client.exists(key(M3))) === 0, 2000);
    expect(await y.tryAcquire()).toEqual({ acquired: true });
    expect(await x.renew()).toMatchObject({ kept: false, lost: [{ model: M3, holder: holder('y4') }] });
  });
});

describe('writer fence: a collector frozen past its lease (SIGSTOP) cannot write when it wakes (real Redis, real processes)', () => {
  const FENCE_PREFIX = 'kwf';
  const FENCE_TTL_MS = 2000;
  let redis: TestRedis;
  let index: KvIndex;
  let pub: FakeVllmPublisher;
  let dir: string;
  const procs: CollectorProc[] = [];
  const base = modelKeyBase(FENCE_PREFIX, MODEL);
  const leaseKey = writerLeaseKey(base);
  const hashes = hashCounter(1n << 44n);

  /** A collector of the fleet; each names the pod with its own address, so the index shows who wrote. */
  async function startCollectorProc(address: string, ttlMs = FENCE_TTL_MS): Promise<CollectorProc> {
    const { config, listen } = await writeFleet(join(dir, `${address.replace(/\W/g, '_')}.yaml`), {
      redisUrl: redis.url,
      prefix: FENCE_PREFIX,
      pub,
      ttlMs,
      address,
    });
    const c = new CollectorProc(config, listen);
    procs.push(c);
    return c;
  }

  async function epoch(): Promise<number> {
    return Number((await redis.client.hget(podsKey(base), POD))!.split(':')[1]);
  }

  /** Every key of the model with its value (DUMP), but the lease: all that a write could change. */
  async function indexKeys(): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (const k of await redis.client.keysBuffer(`${base}*`)) {
      if (k.toString('latin1') === leaseKey) continue;
      out.set(k.toString('latin1'), (await redis.client.dumpBuffer(k))!.toString('hex'));
    }
    return out;
  }

  async function podAddress(): Promise<string | undefined> {
    return (await index.listPods(MODEL)).find((p) => p.podId === POD)?.address;
  }

  beforeAll(async () => {
    redis = await startRedis();
    index = observerIndex({ kind: 'redis', url: redis.url, keyPrefix: FENCE_PREFIX });
    pub = await new FakeVllmPublisher({ format: 'map' }, { topic: 'kv' }).bind();
    dir = mkdtempSync(join(tmpdir(), 'kinf-fence-'));
  });

  afterAll(async () => {
    for (const c of procs) if (c.proc.signalCode === null && c.proc.exitCode === null) c.proc.kill('SIGCONT');
    await Promise.all(procs.map((c) => c.kill()));
    await pub?.close();
    await index?.close();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("the woken collector's writes are refused by Redis, it exits 1 with the lease-loss error, and the new writer loses nothing", async () => {
    const ADDR_A = '127.0.0.1:18201';
    const ADDR_B = '127.0.0.1:18202';
    // A first, so it is the active one; B stands by.
    const a = await startCollectorProc(ADDR_A);
    await waitFor(
      'A holds the lease',
      async () => (await holderIn(redis, leaseKey))?.pid === a.pid,
      START_MS,
      50,
    );
    const b = await startCollectorProc(ADDR_B);
    const aValue = (await redis.client.get(leaseKey))!;
    const aId = parseLeaseHolder(aValue).id;
    await waitFor('A healthy', async () => (await a.health()).status === 200, START_MS, 50);
    await waitIngesting(a, pub);
    const t1 = { tokens: freshTokens(3), hashes: hashes(3) };
    await pub.publish([
      { type: 'BlockStored', hashes: t1.hashes, parent: null, tokens: t1.tokens, blockSize: BS },
    ]);
    await waitCached(index, POD, t1.tokens, 3);
    expect(await podAddress()).toBe(ADDR_A);
    await waitFor('B standing by', async () => (await b.health()).body.standby === true, START_MS, 50);

    // A freezes (a GC pause, a VM stall) for longer than its lease: B takes over and rebuilds the pod.
    a.proc.kill('SIGSTOP');
    await waitFor(
      'B took the lease over',
      async () => (await holderIn(redis, leaseKey))?.pid === b.pid,
      10_000,
      50,
    );
    const bId = (await holderIn(redis, leaseKey))!.id;
    await waitFor('B healthy', async () => (await b.health()).status === 200, 10_000, 50);
    // B's first write to the pod is its clear, then the replay: the pod's apply record is B's.
    await waitFor(
      "B's rebuild",
      async () => (await redis.client.hget(appliedKey(base), POD))?.startsWith(`${bId}:`),
      10_000,
      50,
    );
    await waitCached(index, POD, t1.tokens, 3);
    await waitFor('B registered its address', async () => (await podAddress()) === ADDR_B, 10_000, 50);
    // Traffic while A is frozen: B writes it; A's subscriber will find it queued when it wakes.
    const t2 = { tokens: freshTokens(2), hashes: hashes(2) };
    await pub.publish([
      { type: 'BlockStored', hashes: t2.hashes, parent: null, tokens: t2.tokens, blockSize: BS },
    ]);
    await waitCached(index, POD, t2.tokens, 2);

    // B is paused too, for less than a third of its lease (it stays the holder), so that nothing but A
    // can write meanwhile: whatever changes in Redis now is A's.
    b.proc.kill('SIGSTOP');
    let before = await indexKeys();
    await waitFor(
      'B settled',
      async () => {
        await new Promise((r) => setTimeout(r, 100));
        const now = await indexKeys();
        const same = JSON.stringify([...now]) === JSON.stringify([...before]);
        before = now;
        return same;
      },
      5000,
      0,
    );
    // More events for the pod, queued for both.
    const t3 = { tokens: freshTokens(2), hashes: hashes(2) };
    await pub.publish([
      { type: 'BlockStored', hashes: t3.hashes, parent: null, tokens: t3.tokens, blockSize: BS },
    ]);
    await pub.publish([{ type: 'BlockRemoved', hashes: [t2.hashes[1]!] }]);

    // What reaches Redis from A once it wakes: its index writes carry its holder value (the fence).
    const writeShas = new Set([SCRIPTS.apply.sha1, SCRIPTS.upsertPod.sha1, SCRIPTS.removePod.sha1]);
    const fromA: string[][] = [];
    const monitor = await redis.client.monitor();
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (
        args[0]?.toLowerCase() === 'evalsha' &&
        writeShas.has(args[1]!) &&
        args.some((x) => x.includes(aId))
      )
        fromA.push(args);
    });
    try {
      a.proc.kill('SIGCONT');
      // Its first timers fire before any reply can reach it: the renewal, and the freshness heartbeat's
      // state write (and the queued events' applies): sent by a process that does not know yet.
      expect(await a.exited).toBe(1);
      await waitFor("A's writes reached Redis", () => fromA.length > 0, 2000);
    } finally {
      monitor.disconnect();
    }
    // Refused, every one: the index is exactly as B left it (without the fence, A's heartbeat would have
    // put A's address back, and a write without a floor would have counted A's blocks again).
    expect(await indexKeys()).toEqual(before);
    expect(await podAddress()).toBe(ADDR_B);
    expect(await holderIn(redis, leaseKey)).toMatchObject({ pid: b.pid });
    const lost = a.lines().find((l) => l.level === 'error' && l.msg.startsWith('writer lease lost'));
    expect(lost?.msg).toContain(`pid ${b.pid}`);
    expect(lost).toMatchObject({ models: [MODEL], holder: { id: bId, pid: b.pid } });
    expect(lost?.detectedBy).toMatch(/^(fence|renewal)$/); // whichever reply A read first
    expect(a.lines().some((l) => l.msg.startsWith('exiting with status 1'))).toBe(true);

    // B carries on as the single writer: the events it was sent while paused, each counted once.
    b.proc.kill('SIGCONT');
    await waitCached(index, POD, t3.tokens, 2);
    await waitCached(index, POD, t2.tokens, 1);
    const e = await epoch();
    const one = packEntry([1, 0, 0], e);
    expect(await rawEntries(redis, base, t1.tokens)).toEqual([one, one, one]);
    expect(await rawEntries(redis, base, t2.tokens)).toEqual([one, null]);
    expect(await rawEntries(redis, base, t3.tokens)).toEqual([one, one]);
    await waitFor('B healthy again', async () => (await b.health()).status === 200, 10_000, 50);
    // B's next write checks its floor: nothing of A's landed, so no loss, `overwritten` or other.
    const t4 = { tokens: freshTokens(1), hashes: hashes(1) };
    await pub.publish([
      { type: 'BlockStored', hashes: t4.hashes, parent: null, tokens: t4.tokens, blockSize: BS },
    ]);
    await waitCached(index, POD, t4.tokens, 1);
    expect(indexLosses(await b.metrics())).toBe(0);
    expect(b.lines().filter((l) => l.level === 'error')).toEqual([]);
    expect(b.proc.exitCode).toBeNull();
  }, 120_000);

  it('the fence alone: a write refused long before any renewal is a lost lease, never retried; exit 1 at once', async () => {
    // A collector whose renewal comes only every 20 s: within this test only the fence can find that its
    // lease is gone. Whatever the test above left running is gone first, and its lease with it.
    await Promise.all(procs.map((p) => p.kill()));
    await redis.client.del(leaseKey);
    const c = await startCollectorProc('127.0.0.1:18203', 60_000);
    await waitFor(
      'C holds the lease',
      async () => (await holderIn(redis, leaseKey))?.pid === c.pid,
      START_MS,
      50,
    );
    await waitFor('C healthy', async () => (await c.health()).status === 200, START_MS, 50);
    await waitIngesting(c, pub);
    const intruder = { id: 'intruder', host: 'elsewhere', pid: 4242 };
    await redis.client.set(leaseKey, JSON.stringify(intruder), 'PX', 60_000);
    const before = await indexKeys();
    const t0 = Date.now();
    const t5 = { tokens: freshTokens(2), hashes: hashes(2) };
    await pub.publish([
      { type: 'BlockStored', hashes: t5.hashes, parent: null, tokens: t5.tokens, blockSize: BS },
    ]);
    expect(await c.exited).toBe(1);
    expect(Date.now() - t0).toBeLessThan(5000); // a renewal would have come after 20 s
    const lost = c.lines().find((l) => l.level === 'error' && l.msg.startsWith('writer lease lost'));
    expect(lost?.msg).toContain('intruder (host elsewhere, pid 4242): the index refused a write (fenced)');
    expect(lost).toMatchObject({
      models: [MODEL],
      holder: intruder,
      detectedBy: 'fence',
      err: { code: 'KINF_ERR_LEASE_LOST' },
    });
    // Not taken for a transient error: no retry, no "index write failed".
    expect(c.lines().filter((l) => l.msg.startsWith('index write failed'))).toEqual([]);
    expect(await indexKeys()).toEqual(before);
    expect(await redis.client.get(leaseKey)).toBe(JSON.stringify(intruder));
  }, 120_000);
});

describe('handoff checkpoints: a collector killed after a quiet spell (real Redis, real processes)', () => {
  let redis: TestRedis;
  let index: KvIndex;
  let pub: FakeVllmPublisher;
  let dir: string;
  const procs: CollectorProc[] = [];
  const hashes = hashCounter(3n << 40n);

  beforeAll(async () => {
    redis = await startRedis();
    index = observerIndex({ kind: 'redis', url: redis.url, keyPrefix: 'khc' });
    // A replay buffer of 3 batches: what the killed collector applied is gone from it by the time the next
    // one starts, so only the checkpoint keeps those blocks.
    pub = await new FakeVllmPublisher({ format: 'map' }, { topic: 'kv', bufferSteps: 3 }).bind();
    dir = mkdtempSync(join(tmpdir(), 'kinf-checkpoint-'));
  });

  afterAll(async () => {
    await Promise.all(procs.map((c) => c.kill()));
    await pub?.close();
    await index?.close();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('SIGKILL: the next collector goes on from the handoff saved after the pod went quiet, and clears nothing', async () => {
    const start = async (name: string): Promise<CollectorProc> => {
      const f = await writeFleet(join(dir, `${name}.yaml`), {
        redisUrl: redis.url,
        prefix: 'khc',
        pub,
        ttlMs: TTL_MS,
        collector: ['handoff_checkpoint_ms: 300'],
      });
      const c = new CollectorProc(f.config, f.listen);
      procs.push(c);
      await waitFor(
        `${name} healthy`,
        async () => (await c.health().catch(() => null))?.status === 200,
        START_MS,
        50,
      );
      return c;
    };
    const a = await start('a');
    await waitIngesting(a, pub);
    const early = { tokens: freshTokens(3), hashes: hashes(3) };
    await pub.publish([
      { type: 'BlockStored', hashes: early.hashes, parent: null, tokens: early.tokens, blockSize: BS },
    ]);
    await waitCached(index, POD, early.tokens, 3);
    await waitFor(
      'a checkpoint',
      async () => podMetric(await a.metrics(), 'handoff_saves_total', 'result="checkpointed"') >= 1,
      10_000,
      50,
    );
    await a.kill(); // no clean stop: only the checkpoint is left

    // While no collector runs, three batches: the buffer now holds only them. The last one extends the chain
    // from a parent that only the checkpoint knows.
    await pub.publish([]);
    await pub.publish([]);
    const more = { tokens: freshTokens(1), hashes: hashes(1) };
    await pub.publish([
      {
        type: 'BlockStored',
        hashes: more.hashes,
        parent: early.hashes[2]!,
        tokens: more.tokens,
        blockSize: BS,
      },
    ]);
    const b = await start('b'); // once a's lease has expired
    await waitCached(index, POD, [...early.tokens, ...more.tokens], 4);
    const m = await b.metrics();
    expect(podMetric(m, 'handoff_takes_total', 'result="resumed"')).toBe(1);
    expect(podMetric(m, 'pod_clears_total', 'reason="start"')).toBe(0);
    expect(podMetric(m, 'pod_clears_total', 'reason="gap"')).toBe(0);
    expect(b.lines().filter((l) => l.level === 'error')).toEqual([]);
  });
});
