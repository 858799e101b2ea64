import { describe, expect, it } from 'vitest';
import { blockKeys, keySeed } from '../../../src/core/block-keys.js';
import {
  ApplyQueue,
  type ApplyQueueHooks,
  type QueuedBatch,
} from '../../../src/collector/ops/apply-queue.js';
import {
  MemoryKvIndex,
  type ApplyId,
  type IndexLossReason,
  type IndexOp,
  type KvIndex,
  type PodRef,
} from '../../../src/index/index.js';
import { waitFor } from '../../helpers/ports.js';

const POD: PodRef = { model: 'm', podId: 'p' };
const KEYS = blockKeys(
  Array.from({ length: 64 }, (_, i) => i),
  4,
  keySeed({ model: 'm' }),
);

/** The real in-memory index, recording each apply() call (the queue's unit of work). */
class RecordingIndex extends MemoryKvIndex {
  calls: IndexOp[][] = [];
  ids: ApplyId[] = [];
  failNext = 0;
  /** Writes that run, but whose answer is lost (a timeout): the caller sees a failure. */
  loseAnswerOfNext = 0;
  readonly lossListeners = new Set<(reason: IndexLossReason) => void>();
  override async apply(pod: PodRef, ops: readonly IndexOp[], id?: ApplyId): Promise<void> {
    if (id) this.ids.push(id);
    if (this.failNext > 0) {
      this.failNext--;
      throw new Error('index unavailable');
    }
    this.calls.push(ops.map((o) => (o.op === 'clear' ? o : { ...o, keys: [...o.keys] })));
    await super.apply(pod, ops, id);
    if (this.loseAnswerOfNext > 0) {
      this.loseAnswerOfNext--;
      throw new Error('apply: no answer from Redis within 2000 ms');
    }
  }
  onWritesLost(_pod: PodRef, listener: (reason: IndexLossReason) => void): () => void {
    this.lossListeners.add(listener);
    return () => this.lossListeners.delete(listener);
  }
  lose(reason: IndexLossReason): void {
    for (const f of [...this.lossListeners]) f(reason);
  }
}

function hooks(
  over: Partial<ApplyQueueHooks> = {},
): ApplyQueueHooks & { applied: ApplyQueueHooks['applied'] } {
  return {
    applied: () => {},
    failed: () => {},
    overflow: () => {},
    recovered: () => {},
    probe: async () => {},
    ...over,
  };
}

const store = (seq: number, ...i: number[]): QueuedBatch => ({
  seq,
  tsMs: 0,
  ops: [{ op: 'store', tier: 'GPU', keys: i.map((x) => KEYS[x]!) }],
});

async function prefix(index: KvIndex): Promise<number> {
  await index.upsertPodState(POD, { address: 'a:1' });
  return (await index.lookup('m', KEYS)).pods[0]!.prefixBlocks.GPU;
}

describe('ApplyQueue', () => {
  it('keeps one write in flight and merges everything queued meanwhile into the next, in order', async () => {
    const index = new RecordingIndex();
    const seen: number[] = [];
    const q = new ApplyQueue(
      index,
      POD,
      { maxQueuedOps: 1000, maxOpsPerApply: 1000, retryMinMs: 1, retryMaxMs: 5 },
      hooks({ applied: (b) => seen.push(...b.map((x) => x.seq)) }),
    );
    for (let i = 0; i < 6; i++) q.push(store(i, i));
    await q.drained();
    expect(index.calls).toEqual([
      [{ op: 'store', tier: 'GPU', keys: [KEYS[0]] }],
      [{ op: 'store', tier: 'GPU', keys: KEYS.slice(1, 6) }],
    ]);
    expect(seen).toEqual([0, 1, 2, 3, 4, 5]);
    expect(q.lastAppliedSeq).toBe(5);
    expect(await prefix(index)).toBe(6);
  });

  it('caps ops per write, and retries a failed write before anything queued after it', async () => {
    const index = new RecordingIndex();
    index.failNext = 2;
    let failures = 0;
    const q = new ApplyQueue(
      index,
      POD,
      { maxQueuedOps: 1000, maxOpsPerApply: 2, retryMinMs: 1, retryMaxMs: 5 },
      hooks({ failed: () => failures++ }),
    );
    q.push(store(0, 0, 1));
    q.push(store(1, 2));
    q.push(store(2, 3));
    q.push({ seq: 3, tsMs: 0, ops: [{ op: 'remove', tier: 'GPU', keys: [KEYS[3]!] }] });
    await q.drained();
    expect(failures).toBe(2);
    expect(index.calls.map((c) => c.map((o) => o.op))).toEqual([['store'], ['store'], ['remove']]);
    expect(await prefix(index)).toBe(3);
  });

  it('past the bound: drops the queue, suspends, and resumes once the probe succeeds', async () => {
    const index = new RecordingIndex();
    index.failNext = 1_000_000;
    let probes = 0;
    const events: string[] = [];
    const q = new ApplyQueue(
      index,
      POD,
      { maxQueuedOps: 3, maxOpsPerApply: 100, retryMinMs: 1, retryMaxMs: 2 },
      hooks({
        overflow: (ops, batches) => events.push(`overflow ${ops}/${batches}`),
        recovered: () => events.push('recovered'),
        probe: async () => {
          if (++probes < 3) throw new Error('still down');
          index.failNext = 0;
        },
      }),
    );
    q.push(store(0, 0, 1));
    q.push(store(1, 2));
    expect(q.push(store(2, 3))).toBe(false); // 4 ops > 3
    expect(q.suspended).toBe(true);
    expect(q.queuedOps).toBe(0);
    expect(q.push(store(3, 4))).toBe(false);
    await waitFor('recovery', () => events.includes('recovered'), 5000, 2);
    expect(events).toEqual(['overflow 2/2', 'recovered']); // batches 1 and 2; batch 0 was already sent
    expect(q.push(store(4, 0))).toBe(true);
    await q.drained();
    expect(index.calls).toEqual([[{ op: 'store', tier: 'GPU', keys: [KEYS[0]] }]]);
  });

  it('resends a failed write as it was, under the same id: a write that ran is not counted twice', async () => {
    const index = new RecordingIndex();
    index.loseAnswerOfNext = 2; // it runs, the answer is lost, twice in a row
    let failures = 0;
    const q = new ApplyQueue(
      index,
      POD,
      { maxQueuedOps: 1000, maxOpsPerApply: 1000, retryMinMs: 1, retryMaxMs: 5 },
      hooks({ failed: () => failures++ }),
    );
    q.push(store(0, 0, 1, 2));
    await q.drained();
    q.push(store(1, 3));
    await q.drained();
    expect(failures).toBe(2);
    expect(index.ids).toHaveLength(4);
    expect(index.ids[1]).toEqual(index.ids[0]); // the retries
    expect(index.ids[2]).toEqual(index.ids[0]);
    expect(index.ids[3]!.writer).toBe(index.ids[0]!.writer);
    expect(index.ids[3]!.seq).toBeGreaterThan(index.ids[0]!.seq); // a new write: a new id
    expect(await prefix(index)).toBe(4);
    // Had the retries counted, the blocks would survive one eviction.
    q.push({ seq: 2, tsMs: 0, ops: [{ op: 'remove', tier: 'GPU', keys: KEYS.slice(0, 4) }] });
    await q.drained();
    expect(await prefix(index)).toBe(0);
  });

  it("when the index reports the pod's writes lost: drops the queue, suspends, probes, hands over to rebuild", async () => {
    const index = new RecordingIndex();
    const events: string[] = [];
    let probes = 0;
    const q = new ApplyQueue(
      index,
      POD,
      { maxQueuedOps: 1000, maxOpsPerApply: 1000, retryMinMs: 1, retryMaxMs: 5 },
      hooks({
        lost: (reason, ops, batches) => events.push(`lost ${reason} ${ops}/${batches}`),
        recovered: () => events.push('recovered'),
        probe: async () => {
          probes++;
        },
      }),
    );
    index.failNext = 1_000_000; // writes fail meanwhile: batches pile up
    q.push(store(0, 0));
    q.push(store(1, 1, 2));
    await waitFor('a failed write', () => index.ids.length > 0, 5000, 2);
    index.lose('missing');
    expect(q.suspended).toBe(true);
    expect(q.queuedOps).toBe(0);
    expect(q.push(store(2, 3))).toBe(false);
    index.lose('rolled_back'); // counted, but the rebuild ahead covers it
    index.failNext = 0;
    await waitFor('recovery', () => events.includes('recovered'), 5000, 2);
    expect(events).toEqual(['lost missing 3/2', 'recovered']);
    expect(probes).toBe(1);
    expect(q.losses).toEqual({ missing: 1, rolled_back: 1, overwritten: 0 });
    expect(q.push(store(3, 5))).toBe(true);
    await q.drained();
    await q.close();
    expect(index.lossListeners.size).toBe(0); // close() unsubscribes
    index.lose('missing');
    expect(q.losses.missing).toBe(1);
  });
});
