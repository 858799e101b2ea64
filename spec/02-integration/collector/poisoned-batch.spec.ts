import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CollectorProcess } from '../../../bench/lib/frame-fuzz/collector-process.js';
import { createKvIndex } from '../../../src/index/index.js';
import type { KvIndex } from '../../../src/index/index.js';
import { freePort, waitFor } from '../../helpers/ports.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';
import { FakeVllmPublisher } from '../../helpers/collector/fake-publisher.js';
import {
  BS,
  MODEL,
  blockStored,
  cachedBlocks,
  freshTokens,
  hashCounter,
} from '../../helpers/collector/collector-harness.js';

const hashes = hashCounter(2n ** 63n + 36_000n);

/**
 * Issue #36, item 1, with a real `kinference collector` process, real ZeroMQ and a real Redis: a batch whose
 * ts is finite in seconds (−1e306) but −Infinity in milliseconds reached the event-lag histogram, prom-client
 * threw, and the process died. The batch stays in vLLM's replay buffer, so a restarted collector met it again.
 */
describe('a poisoned batch (ts = −1e306) against a real collector process', () => {
  let redis: TestRedis;
  let index: KvIndex;
  let pub: FakeVllmPublisher;
  let dir: string;
  let config: string;
  let listen: string;
  let collector: CollectorProcess | null = null;
  const chains = { a: freshTokens(2), b: freshTokens(2), c: freshTokens(2) };

  const start = (): CollectorProcess => (collector = new CollectorProcess(config, listen));
  const metric = async (name: string, labels: Record<string, string> = {}): Promise<number> =>
    (await collector!.metrics())?.sum(`kinference_collector_${name}`, labels) ?? -1;
  /** Waits for `chain` to be cached, or for the collector to die (then the caller's expectations say so). */
  const cachedOrDead = (chain: number[]): Promise<boolean> =>
    waitFor(
      'the chain cached or the collector gone',
      async () => !collector!.alive || (await cachedBlocks(index, 'pod-p', chain)) === 2,
      30_000,
    );

  beforeAll(async () => {
    redis = await startRedis();
    index = createKvIndex({ kind: 'redis', url: redis.url, keyPrefix: 'kpoison', lookupTimeoutMs: 2000 });
    pub = await new FakeVllmPublisher({ format: 'array' }, { topic: 'kv' }).bind();
    dir = mkdtempSync(join(tmpdir(), 'kinf-poison-'));
    listen = `127.0.0.1:${await freePort()}`;
    config = join(dir, 'fleet.yaml');
    writeFileSync(
      config,
      [
        `redis_url: ${redis.url}`,
        'redis_key_prefix: kpoison',
        'models:',
        `  ${MODEL}: { tokenizer: "tiktoken:o200k_base", chat_template: chatml, block_size: ${BS} }`,
        'pods:',
        '  - id: pod-p',
        `    model: ${MODEL}`,
        '    address: 127.0.0.1:18098',
        `    kv_events: ${pub.endpoint}`,
        `    kv_events_replay: ${pub.replayEndpoint}`,
        '    kv_events_topic: kv',
        'collector:',
        `  listen: ${listen}`,
        '  log_level: warn',
        // The killed collector's lease must expire before the next one writes: not the default 15 s.
        '  writer_lease_ms: 1000',
      ].join('\n'),
    );
  });

  afterAll(async () => {
    await collector?.stop();
    await pub?.close();
    await index?.close();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('three batches, the second with ts = −1e306: the collector stays up, skips and counts that batch, indexes the others', async () => {
    start();
    // Subscribed: empty batches until one is ingested (ZMQ slow joiner; never a sleep).
    await waitFor(
      'collector subscribed',
      async () => {
        if (!collector!.alive) throw new Error(`collector exited: ${collector!.stderr}`);
        if ((await metric('batches_total')) > 0 && (await metric('resyncing')) === 0) return true;
        await pub.publish([]);
        return false;
      },
      60_000,
      100,
    );
    const [ha, hb, hc] = [hashes(2), hashes(2), hashes(2)];
    await pub.publish([blockStored(ha, null, chains.a)]);
    await pub.publish([blockStored(hb, null, chains.b)], { ts: -1e306 });
    await pub.publish([blockStored(hc, null, chains.c)]);
    await cachedOrDead(chains.c);

    expect(collector!.alive, collector!.stderr).toBe(true);
    expect(await collector!.healthz()).toBe(200);
    expect(await cachedBlocks(index, 'pod-p', chains.a)).toBe(2);
    expect(await cachedBlocks(index, 'pod-p', chains.b)).toBe(0);
    expect(await metric('decode_errors_total', { reason: 'out_of_range' })).toBe(1);
    expect(await metric('internal_errors_total')).toBe(0);
  });

  it('a collector restarted (after a crash: no handoff) meets the poisoned batch again in the replay buffer and stays up', async () => {
    collector!.proc.kill('SIGKILL');
    await waitFor('the first collector gone', () => !collector!.alive);
    start();
    // It clears the pod and replays the buffer from 0: the poisoned batch among the others.
    await waitFor(
      'the replay applied',
      async () => !collector!.alive || (await metric('replayed_batches_total')) >= pub.seq,
      60_000,
      100,
    );
    await cachedOrDead(chains.c);
    expect(collector!.alive, collector!.stderr).toBe(true);
    expect(await collector!.healthz()).toBe(200);
    expect(await cachedBlocks(index, 'pod-p', chains.a)).toBe(2);
    expect(await cachedBlocks(index, 'pod-p', chains.b)).toBe(0);
    expect(await metric('decode_errors_total', { reason: 'out_of_range' })).toBe(1);
  });
});
