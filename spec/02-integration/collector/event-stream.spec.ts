import { beforeAll, describe, expect, it } from 'vitest';
import type { StreamWorker } from '../../../src/collector/stream-worker.js';
import { waitFor } from '../../helpers/ports.js';
import { FakeVllmPublisher } from '../../helpers/collector/fake-publisher.js';
import {
  blockStored,
  BS,
  cachedBlocks,
  freshTokens,
  hashCounter,
  MODEL,
  startCollector,
  waitCached,
  waitSubscribed,
} from '../../helpers/collector/collector-harness.js';
import { collectorRig } from '../../helpers/collector/collector-rig.js';
import { encodeMsgspec, f64 } from '../../helpers/collector/msgspec-encoder.js';
import { encodeBatch, seqFrame } from '../../helpers/collector/vllm-frames.js';
import { observerIndex } from '../../helpers/observer-index.js';

// Hashes above 2^63: a double would round them, and chaining would then fail.
const hashes = hashCounter(2n ** 63n + 12345n);

describe.each(['array', 'map'] as const)(
  'collector ← vLLM KV events (%s encoding), real ZMQ and Redis',
  (format) => {
    let plain: FakeVllmPublisher; // no replay endpoint
    const rig = collectorRig({
      keyPrefix: `kt-${format}`,
      lookupTimeoutMs: 2000,
      index: observerIndex,
      stopAfter: 'all',
      cleanup: () => plain?.close(),
    });
    const w = (id: string): StreamWorker => rig.collector.worker(id)!;

    beforeAll(async () => {
      const batch = format === 'array' ? { format, storedFields: 11, removedFields: 3 } : { format };
      rig.pub = await new FakeVllmPublisher(batch, { topic: 'kv-events' }).bind();
      plain = await new FakeVllmPublisher(batch, { replay: false }).bind();
      rig.collector = startCollector(rig.index, [
        {
          id: 'pod-a',
          model: MODEL,
          address: '127.0.0.1:18000',
          kv_events: rig.pub.endpoint,
          kv_events_replay: rig.pub.replayEndpoint,
          kv_events_topic: 'kv-events',
        },
        { id: 'pod-b', model: MODEL, address: '127.0.0.1:18001', kv_events: plain.endpoint },
      ]);
      await rig.collector.start();
      await waitSubscribed(rig.pub, () => rig.collector.worker('pod-a'));
      await waitSubscribed(plain, () => rig.collector.worker('pod-b'));
    });

    it('a stored prefix is found for that pod; extending it through a uint64 parent hash works', async () => {
      const t = freshTokens(5);
      const h = hashes(5);
      await rig.pub.publish([blockStored(h.slice(0, 4), null, t.slice(0, 4 * BS))]);
      await waitCached(rig.index, 'pod-a', t, 4);
      await rig.pub.publish([blockStored([h[4]!], h[3]!, t.slice(4 * BS))]);
      await waitCached(rig.index, 'pod-a', t, 5);
      expect(await cachedBlocks(rig.index, 'pod-b', t)).toBe(0);
    });

    it('removed blocks are no longer found; the prefix stops at the first removed block', async () => {
      const t = freshTokens(4);
      const h = hashes(4);
      await rig.pub.publish([blockStored(h, null, t)]);
      await waitCached(rig.index, 'pod-a', t, 4);
      await rig.pub.publish([{ type: 'BlockRemoved', hashes: [h[3]!] }]);
      await waitCached(rig.index, 'pod-a', t, 3);
      await rig.pub.publish([{ type: 'BlockRemoved', hashes: [h[1]!] }]);
      await waitCached(rig.index, 'pod-a', t, 1);
    });

    it('LoRA and cache_salt chains get the router’s seeded keys; multimodal blocks are not indexed', async () => {
      const t = freshTokens(2);
      const [a, b] = hashes(2);
      await rig.pub.publish([
        // group_idx: a vLLM whose multimodal keys are tuples, so the plain string is the cache_salt
        blockStored([a!], null, t.slice(0, BS), {
          loraName: 'sql-lora',
          loraId: 1,
          extraKeys: [['sql-lora', 'salt-9']],
          groupIdx: 0,
        }),
        blockStored([b!], a!, t.slice(BS), { loraName: 'sql-lora', loraId: 1, extraKeys: [['sql-lora']] }),
      ]);
      await waitCached(rig.index, 'pod-a', t, 2, { lora: 'sql-lora', salt: 'salt-9' });
      expect(await cachedBlocks(rig.index, 'pod-a', t)).toBe(0); // not under the base model's seed
      const m = freshTokens(2);
      await rig.pub.publish([blockStored(hashes(2), null, m, { extraKeys: [null, [['image-1', 0]]] })]);
      await waitCached(rig.index, 'pod-a', m, 1);
      await waitFor('skip counted', () => w('pod-a').stats.skipped.unreproducible_extra_keys >= 1);
    });

    it('AllBlocksCleared drops every block of the pod', async () => {
      const t = freshTokens(3);
      await rig.pub.publish([blockStored(hashes(3), null, t)]);
      await waitCached(rig.index, 'pod-a', t, 3);
      await rig.pub.publish([{ type: 'AllBlocksCleared' }]);
      await waitCached(rig.index, 'pod-a', t, 0);
    });

    it('a gap is repaired from the replay endpoint: the dropped batch’s blocks are indexed', async () => {
      const t = freshTokens(3);
      const h = hashes(3);
      const gaps = w('pod-a').stats.gaps;
      await rig.pub.publish([blockStored(h.slice(0, 2), null, t.slice(0, 2 * BS))], { drop: true }); // lost on the wire (HWM)
      await rig.pub.publish([blockStored([h[2]!], h[1]!, t.slice(2 * BS))]);
      await waitCached(rig.index, 'pod-a', t, 3);
      expect(w('pod-a').stats.gaps).toBe(gaps + 1);
      expect(w('pod-a').stats.replays.covered).toBeGreaterThanOrEqual(1);
    });

    it('without replay, a gap clears the pod and it is rebuilt from new events', async () => {
      const old = freshTokens(2);
      await plain.publish([blockStored(hashes(2), null, old)]);
      await waitCached(rig.index, 'pod-b', old, 2);
      const lost = freshTokens(1);
      const lostHash = hashes(1);
      await plain.publish([blockStored(lostHash, null, lost)], { drop: true });
      const t = freshTokens(2);
      await plain.publish([blockStored(hashes(2), null, t)]);
      await waitCached(rig.index, 'pod-b', t, 2);
      expect(await cachedBlocks(rig.index, 'pod-b', old)).toBe(0);
      expect(w('pod-b').stats.podClears.gap).toBe(1);
    });

    it('a sequence that goes backwards (engine restart) clears the pod; the new process’s blocks are indexed', async () => {
      const before = freshTokens(2);
      await rig.pub.publish([blockStored(hashes(2), null, before)]);
      await waitCached(rig.index, 'pod-a', before, 2);
      rig.pub.restart();
      const after = freshTokens(2);
      await rig.pub.publish([blockStored(hashes(2), null, after)]); // seq 0 again
      await waitCached(rig.index, 'pod-a', after, 2);
      expect(await cachedBlocks(rig.index, 'pod-a', before)).toBe(0);
      expect(w('pod-a').stats.restarts).toBe(1);
    });

    it('malformed frames, truncated msgpack and wrong types are counted; the stream keeps working', async () => {
      const s = w('pod-a').stats;
      await rig.pub.sendRaw([Buffer.from('kv-events'), seqFrame(rig.pub.seq)]); // 2 frames
      await rig.pub.sendRaw([Buffer.from('kv-events'), Buffer.alloc(4), Buffer.from([0x90])]); // bad sequence frame
      const good = encodeBatch([blockStored(hashes(1), null, freshTokens(1))], { format });
      await rig.pub.publishPayload(good.subarray(0, good.length - 5)); // truncated
      await rig.pub.publishPayload(Buffer.from('not msgpack at all'));
      await rig.pub.publishPayload(encodeMsgspec([f64(1), 'events', 0])); // wrong type
      await rig.pub.publishPayload(
        encodeMsgspec([f64(1), [['BlockStored', 'x', null, [], 16, null, 'GPU', null], ['Mystery']], 0]),
      );
      const t = freshTokens(2);
      await rig.pub.publish([blockStored(hashes(2), null, t)]);
      await waitCached(rig.index, 'pod-a', t, 2);
      expect(s.malformedFrames).toBe(2);
      expect(s.decodeErrors.truncated).toBe(1);
      expect(s.decodeErrors.msgpack + s.decodeErrors.batch_shape).toBeGreaterThanOrEqual(1);
      expect(s.decodeErrors.batch_field).toBe(1);
      expect(s.invalidEvents.bad_field).toBe(1);
      expect(s.unknownEvents).toBe(1);
      expect(s.gaps).toBe(1); // only the deliberate one above: bad frames consumed no sequence numbers
    });

    it('exports its counters on /metrics (prom-client registry)', async () => {
      const text = await rig.collector.metrics.registry.metrics();
      expect(text).toMatch(/kinference_collector_block_events_total\{pod="pod-a",kind="stored"\} [1-9]/);
      expect(text).toMatch(/kinference_collector_sequence_gaps_total\{pod="pod-a"\} 1/);
      expect(text).toMatch(/kinference_collector_event_lag_seconds_count\{pod="pod-a"\} [1-9]/);
      expect(text).toContain('kinference_collector_process_resident_memory_bytes');
    });

    it('drops a pod’s series when the pod leaves (pod ids change with every rollout)', async () => {
      await rig.collector.reconcile([]);
      const text = await rig.collector.metrics.registry.metrics();
      expect(text).not.toMatch(/pod="pod-a"/);
    });
  },
);
