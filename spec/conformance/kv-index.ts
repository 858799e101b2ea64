import { afterEach, describe, expect, it } from 'vitest';
import type { Calibration, LookupResult, PodState } from '../../src/core/types.js';
import {
  REFCOUNT_MAX,
  defaultPodState,
  type IndexOp,
  type KvIndex,
  type PodRef,
} from '../../src/index/index.js';
import { branch, chain } from './chains.js';

/**
 * The KvIndex contract (src/index/kv-index.ts), one suite for every implementation. A runner calls
 * `describeKvIndexConformance(name, create)`; `create` returns a fresh, empty index for each test.
 */
export function describeKvIndexConformance(name: string, create: () => Promise<KvIndex> | KvIndex): void {
  describe(`KvIndex conformance: ${name}`, () => {
    const open: KvIndex[] = [];
    const fresh = async (): Promise<KvIndex> => {
      const ix = await create();
      open.push(ix);
      return ix;
    };
    afterEach(async () => {
      await Promise.all(open.splice(0).map((ix) => ix.close()));
    });

    const M = 'Qwen/Qwen3-8B';
    const A: PodRef = { model: M, podId: 'pod-a' };
    const B: PodRef = { model: M, podId: 'pod-b' };
    const sys = chain('system prompt', 24);

    const prefixes = (r: LookupResult) =>
      Object.fromEntries(r.pods.map((p) => [p.state.podId, p.prefixBlocks]));
    const gpu = async (ix: KvIndex, keys = sys) =>
      Object.fromEntries((await ix.lookup(M, keys)).pods.map((p) => [p.state.podId, p.prefixBlocks.GPU]));

    it('stores blocks and finds the whole prefix, with the pod state', async () => {
      const ix = await fresh();
      await ix.upsertPodState(A, { address: '10.0.0.7:8000' });
      await ix.apply(A, [{ op: 'store', keys: sys.slice(0, 8), tier: 'GPU' }]);
      const r = await ix.lookup(M, sys.slice(0, 8));
      expect(r.pods).toHaveLength(1);
      expect(r.pods[0]!.prefixBlocks).toEqual({ GPU: 8, CPU: 8, STORAGE: 8 });
      expect(r.pods[0]!.state).toEqual({ ...defaultPodState(A), address: '10.0.0.7:8000' });
    });

    it('returns the cached part of a longer prompt, and nothing when block 0 differs', async () => {
      const ix = await fresh();
      await ix.upsertPodState(A, {});
      await ix.apply(A, [{ op: 'store', keys: sys.slice(0, 5), tier: 'GPU' }]);
      expect(await gpu(ix)).toEqual({ 'pod-a': 5 });
      for (const n of [1, 2, 3, 4, 5, 6, 7, 9, 17])
        expect(await gpu(ix, sys.slice(0, n))).toEqual({ 'pod-a': Math.min(n, 5) });
      expect(await gpu(ix, chain('another prompt', 24))).toEqual({ 'pod-a': 0 });
    });

    it('stops at the divergence of two prompts sharing a system prompt', async () => {
      const ix = await fresh();
      const convA = branch(sys, 10, 'conversation a', 14);
      const convB = branch(sys, 10, 'conversation b', 14);
      await ix.upsertPodState(A, {});
      await ix.apply(A, [
        { op: 'store', keys: convA.slice(0, 10), tier: 'GPU' },
        { op: 'store', keys: convA.slice(10), tier: 'GPU' },
      ]);
      expect(await gpu(ix, convA)).toEqual({ 'pod-a': 24 });
      expect(await gpu(ix, convB)).toEqual({ 'pod-a': 10 });
    });

    it('counts tiers cumulatively: GPU ≤ CPU ≤ STORAGE', async () => {
      const ix = await fresh();
      await ix.upsertPodState(A, {});
      await ix.upsertPodState(B, {});
      await ix.apply(A, [
        { op: 'store', keys: sys.slice(0, 3), tier: 'GPU' },
        { op: 'store', keys: sys.slice(3, 7), tier: 'CPU' },
        { op: 'store', keys: sys.slice(7, 12), tier: 'STORAGE' },
      ]);
      await ix.apply(B, [{ op: 'store', keys: sys.slice(0, 6), tier: 'CPU' }]);
      expect(prefixes(await ix.lookup(M, sys))).toEqual({
        'pod-a': { GPU: 3, CPU: 7, STORAGE: 12 },
        'pod-b': { GPU: 0, CPU: 6, STORAGE: 6 },
      });
    });

    it('keeps a block stored twice and removed once (refcount), and drops it on the second remove', async () => {
      const ix = await fresh();
      await ix.upsertPodState(A, {});
      const keys = sys.slice(0, 4);
      await ix.apply(A, [{ op: 'store', keys, tier: 'GPU' }]);
      await ix.apply(A, [{ op: 'store', keys: keys.slice(2), tier: 'GPU' }]);
      await ix.apply(A, [{ op: 'remove', keys: keys.slice(2), tier: 'GPU' }]);
      expect(await gpu(ix, keys)).toEqual({ 'pod-a': 4 });
      await ix.apply(A, [{ op: 'remove', keys: keys.slice(2), tier: 'GPU' }]);
      expect(await gpu(ix, keys)).toEqual({ 'pod-a': 2 });
    });

    it('counts each tier separately: removing from CPU leaves the GPU copy', async () => {
      const ix = await fresh();
      await ix.upsertPodState(A, {});
      await ix.apply(A, [
        { op: 'store', keys: sys.slice(0, 4), tier: 'GPU' },
        { op: 'store', keys: sys.slice(0, 4), tier: 'CPU' },
        { op: 'remove', keys: sys.slice(0, 4), tier: 'CPU' },
      ]);
      expect(prefixes(await ix.lookup(M, sys.slice(0, 4)))).toEqual({
        'pod-a': { GPU: 4, CPU: 4, STORAGE: 4 },
      });
      await ix.apply(A, [{ op: 'remove', keys: sys.slice(0, 4), tier: 'GPU' }]);
      expect(prefixes(await ix.lookup(M, sys.slice(0, 4)))).toEqual({
        'pod-a': { GPU: 0, CPU: 0, STORAGE: 0 },
      });
    });

    it('ignores a remove of a block the pod does not hold (no negative count)', async () => {
      const ix = await fresh();
      await ix.upsertPodState(A, {});
      await ix.upsertPodState(B, {});
      await ix.apply(B, [{ op: 'store', keys: sys.slice(0, 6), tier: 'GPU' }]);
      await ix.apply(A, [
        { op: 'remove', keys: sys.slice(0, 6), tier: 'GPU' }, // never stored by A
        { op: 'store', keys: sys.slice(0, 6), tier: 'GPU' },
        { op: 'remove', keys: sys.slice(0, 6), tier: 'CPU' }, // held, but not in that tier
      ]);
      expect(await gpu(ix)).toEqual({ 'pod-a': 6, 'pod-b': 6 });
      await ix.apply(A, [{ op: 'remove', keys: sys.slice(3, 6), tier: 'GPU' }]);
      expect(await gpu(ix)).toEqual({ 'pod-a': 3, 'pod-b': 6 });
    });

    it('saturates refcounts at REFCOUNT_MAX', async () => {
      const ix = await fresh();
      await ix.upsertPodState(A, {});
      const k = sys.slice(0, 1);
      await ix.apply(
        A,
        Array.from({ length: REFCOUNT_MAX + 5 }, () => ({
          op: 'store' as const,
          keys: k,
          tier: 'GPU' as const,
        })),
      );
      await ix.apply(
        A,
        Array.from({ length: REFCOUNT_MAX - 1 }, () => ({
          op: 'remove' as const,
          keys: k,
          tier: 'GPU' as const,
        })),
      );
      expect(await gpu(ix, k)).toEqual({ 'pod-a': 1 });
      await ix.apply(A, [{ op: 'remove', keys: k, tier: 'GPU' }]);
      expect(await gpu(ix, k)).toEqual({ 'pod-a': 0 });
    });

    it('clears a pod in one op, keeps its state and other pods, and accepts new blocks after', async () => {
      const ix = await fresh();
      await ix.upsertPodState(A, { address: 'a:1', running: 3 });
      await ix.upsertPodState(B, {});
      await ix.apply(A, [{ op: 'store', keys: sys, tier: 'GPU' }]);
      await ix.apply(A, [{ op: 'store', keys: sys.slice(0, 4), tier: 'GPU' }]); // refcount 2 on the first 4
      await ix.apply(B, [{ op: 'store', keys: sys.slice(0, 9), tier: 'GPU' }]);
      await ix.apply(A, [{ op: 'clear' }]);
      const r = await ix.lookup(M, sys);
      expect(prefixes(r)).toEqual({
        'pod-a': { GPU: 0, CPU: 0, STORAGE: 0 },
        'pod-b': { GPU: 9, CPU: 9, STORAGE: 9 },
      });
      expect(r.pods[0]!.state).toMatchObject({ address: 'a:1', running: 3 });
      await ix.apply(A, [{ op: 'store', keys: sys.slice(0, 3), tier: 'GPU' }]);
      expect(await gpu(ix)).toEqual({ 'pod-a': 3, 'pod-b': 9 });
      // the old refcount of 2 is gone with the epoch: one remove empties the re-stored block
      await ix.apply(A, [{ op: 'remove', keys: sys.slice(2, 3), tier: 'GPU' }]);
      expect(await gpu(ix)).toEqual({ 'pod-a': 2, 'pod-b': 9 });
    });

    it('applies ops of one batch in order (store, clear, store)', async () => {
      const ix = await fresh();
      await ix.upsertPodState(A, {});
      await ix.apply(A, [
        { op: 'store', keys: sys.slice(0, 10), tier: 'GPU' },
        { op: 'clear' },
        { op: 'store', keys: sys.slice(0, 2), tier: 'GPU' },
      ]);
      expect(await gpu(ix)).toEqual({ 'pod-a': 2 });
    });

    it('keeps models apart, even for the same pod id and keys', async () => {
      const ix = await fresh();
      const other: PodRef = { model: 'meta-llama/Llama-3.1-8B', podId: 'pod-a' };
      const otherB: PodRef = { model: 'meta-llama/Llama-3.1-8B', podId: 'pod-z' };
      await ix.upsertPodState(A, { address: 'qwen:1' });
      await ix.upsertPodState(other, { address: 'llama:1' });
      await ix.upsertPodState(otherB, {});
      await ix.apply(other, [{ op: 'store', keys: sys, tier: 'GPU' }]);
      await ix.apply(otherB, [{ op: 'store', keys: sys, tier: 'GPU' }]);
      await ix.apply(A, [{ op: 'store', keys: sys.slice(0, 2), tier: 'GPU' }]);
      const r = await ix.lookup(M, sys);
      expect(r.pods.map((p) => [p.state.podId, p.state.model, p.state.address, p.prefixBlocks.GPU])).toEqual([
        ['pod-a', M, 'qwen:1', 2],
      ]);
      await ix.apply(other, [{ op: 'clear' }]);
      expect(await gpu(ix)).toEqual({ 'pod-a': 2 });
      expect((await ix.lookup(other.model, sys)).pods.map((p) => p.prefixBlocks.GPU)).toEqual([0, 24]);
      expect(await ix.lookup('no-such-model', sys)).toEqual({ pods: [] });
    });

    it('removePod unregisters the pod and drops its blocks; a re-added pod starts empty', async () => {
      const ix = await fresh();
      await ix.upsertPodState(A, { address: 'a:1', healthy: false });
      await ix.upsertPodState(B, {});
      await ix.apply(A, [{ op: 'store', keys: sys, tier: 'GPU' }]);
      await ix.apply(B, [{ op: 'store', keys: sys.slice(0, 5), tier: 'GPU' }]);
      await ix.removePod(A);
      await ix.removePod({ model: M, podId: 'never-seen' });
      expect((await ix.listPods(M)).map((p) => p.podId)).toEqual(['pod-b']);
      expect(await gpu(ix)).toEqual({ 'pod-b': 5 });
      await ix.upsertPodState(A, {});
      const r = await ix.lookup(M, sys);
      expect(r.pods[0]!.state).toEqual(defaultPodState(A));
      expect(prefixes(r)['pod-a']).toEqual({ GPU: 0, CPU: 0, STORAGE: 0 });
    });

    it('lists registered pods sorted by id; a pod only written by apply is not listed until registered', async () => {
      const ix = await fresh();
      for (const id of ['pod-c', 'pod-a', 'Pod-Z', 'pod-b', 'pod-10', 'pod-9'])
        await ix.upsertPodState({ model: M, podId: id }, { address: `${id}:8000` });
      const ghost: PodRef = { model: M, podId: 'pod-0' };
      await ix.apply(ghost, [{ op: 'store', keys: sys, tier: 'GPU' }]);
      const want = ['Pod-Z', 'pod-10', 'pod-9', 'pod-a', 'pod-b', 'pod-c'];
      expect((await ix.listPods(M)).map((p) => p.podId)).toEqual(want);
      expect((await ix.lookup(M, sys)).pods.map((p) => p.state.podId)).toEqual(want);
      await ix.upsertPodState(ghost, {});
      expect(await gpu(ix)).toEqual({
        'Pod-Z': 0,
        'pod-0': 24,
        'pod-10': 0,
        'pod-9': 0,
        'pod-a': 0,
        'pod-b': 0,
        'pod-c': 0,
      });
      expect((await ix.listPods(M)).map((p) => p.podId)).toEqual(['Pod-Z', 'pod-0', ...want.slice(1)]);
      expect(await ix.listPods('no-such-model')).toEqual([]);
    });

    it('answers empty keys with zero prefixes and every pod state', async () => {
      const ix = await fresh();
      await ix.upsertPodState(A, { running: 2 });
      await ix.apply(A, [{ op: 'store', keys: sys, tier: 'GPU' }]);
      const r = await ix.lookup(M, []);
      expect(r.pods).toHaveLength(1);
      expect(r.pods[0]!.prefixBlocks).toEqual({ GPU: 0, CPU: 0, STORAGE: 0 });
      expect(r.pods[0]!.state.running).toBe(2);
    });

    it('round-trips the pod state and merges partial updates', async () => {
      const ix = await fresh();
      const calibration: Calibration = {
        overheadMs: 21.5,
        prefillMsPerToken: 0.123456789012345,
        attentionMsPerToken2: 6e-7,
        cpuLoadMsPerToken: 0.02,
        decodeStepMs: 41,
        maxBatchedTokens: 8192,
      };
      const full: PodState = {
        podId: 'pod-a',
        model: M,
        address: '10.1.2.3:8000',
        healthy: false,
        running: 7,
        waiting: 3,
        kvUsage: 0.8125,
        kvCapacityTokens: 94_208,
        meanQueuedPrefillTokens: 1234.5,
        maxModelLen: 40_960,
        calibration,
        decodeSteps: {
          contextTokens: 81_234.5,
          stepMs: 72.25,
          intervals: 130,
          line: { baseMs: 43.0012, msPerContextToken: 0.000360125 },
        },
        lastEventAtMs: 1_767_225_600_123,
        lastScrapeAtMs: 1_767_225_600_456,
        resyncing: true,
        partialSinceMs: 1_767_225_599_000,
      };
      const { podId: _p, model: _m, ...patch } = full;
      await ix.upsertPodState(A, patch);
      expect(await ix.listPods(M)).toEqual([full]);
      await ix.upsertPodState(A, { running: 0, healthy: true, calibration: null });
      const after = { ...full, running: 0, healthy: true, calibration: null };
      expect(await ix.listPods(M)).toEqual([after]);
      expect((await ix.lookup(M, sys)).pods.map((p) => p.state)).toEqual([after]);
      await ix.upsertPodState(A, { address: 'ünïcödé-host:1' });
      expect((await ix.listPods(M))[0]!.address).toBe('ünïcödé-host:1');
    });

    it('applies a large batch (more keys than one script call carries)', async () => {
      const ix = await fresh();
      const long = chain('a very long agentic context', 20_000);
      await ix.upsertPodState(A, {});
      await ix.upsertPodState(B, {});
      await ix.apply(A, [{ op: 'store', keys: long, tier: 'GPU' }]);
      await ix.apply(B, [{ op: 'store', keys: long.slice(0, 12_345), tier: 'GPU' }]);
      expect(await gpu(ix, long)).toEqual({ 'pod-a': 20_000, 'pod-b': 12_345 });
      await ix.apply(A, [{ op: 'remove', keys: long.slice(9000), tier: 'GPU' }]);
      expect(await gpu(ix, long)).toEqual({ 'pod-a': 9000, 'pod-b': 12_345 });
    });

    it('applies a retried apply (same id) once, and a new id again', async () => {
      const ix = await fresh();
      await ix.upsertPodState(A, {});
      const keys = sys.slice(0, 4);
      const store: IndexOp[] = [{ op: 'store', keys, tier: 'GPU' }];
      const remove: IndexOp[] = [{ op: 'remove', keys, tier: 'GPU' }];
      await ix.apply(A, store, { writer: 'conf-w', seq: 7 });
      await ix.apply(A, store, { writer: 'conf-w', seq: 7 }); // the retry of an apply that ran
      await ix.apply(A, remove, { writer: 'conf-w', seq: 6 }); // older than the last: skipped too
      expect(await gpu(ix, keys)).toEqual({ 'pod-a': 4 });
      await ix.apply(A, remove, { writer: 'conf-w', seq: 8 });
      expect(await gpu(ix, keys)).toEqual({ 'pod-a': 0 }); // refcount 1, not 2
      await ix.apply(A, store, { writer: 'conf-w', seq: 9 });
      await ix.apply(A, store); // no id: a fresh one
      await ix.apply(A, remove);
      expect(await gpu(ix, keys)).toEqual({ 'pod-a': 4 });
    });

    it('remembers the last id per pod, of any writer; removePod forgets it, clear does not', async () => {
      const ix = await fresh();
      await ix.upsertPodState(A, {});
      await ix.upsertPodState(B, {});
      const keys = sys.slice(0, 3);
      const store: IndexOp[] = [{ op: 'store', keys, tier: 'GPU' }];
      await ix.apply(A, store, { writer: 'w1', seq: 5 });
      await ix.apply(B, store, { writer: 'w1', seq: 5 }); // another pod: its own record
      expect(await gpu(ix, keys)).toEqual({ 'pod-a': 3, 'pod-b': 3 });
      await ix.apply(A, [{ op: 'clear' }], { writer: 'w2', seq: 1 }); // another writer
      await ix.apply(A, store, { writer: 'w1', seq: 5 }); // no longer the last apply: runs
      await ix.apply(A, store, { writer: 'w1', seq: 5 });
      expect(await gpu(ix, keys)).toEqual({ 'pod-a': 3, 'pod-b': 3 });
      await ix.apply(A, [{ op: 'clear' }], { writer: 'w1', seq: 6 });
      await ix.apply(A, store, { writer: 'w1', seq: 6 }); // same id as the clear: skipped
      expect(await gpu(ix, keys)).toEqual({ 'pod-a': 0, 'pod-b': 3 });
      await ix.removePod(A);
      await ix.upsertPodState(A, {});
      await ix.apply(A, store, { writer: 'w1', seq: 6 });
      expect(await gpu(ix, keys)).toEqual({ 'pod-a': 3, 'pod-b': 3 });
      await ix.apply(A, [{ op: 'store', keys: [], tier: 'GPU' }], { writer: 'w1', seq: 9 }); // no-op: no record
      await ix.apply(A, [{ op: 'remove', keys, tier: 'GPU' }], { writer: 'w1', seq: 8 });
      expect(await gpu(ix, keys)).toEqual({ 'pod-a': 0, 'pod-b': 3 });
    });

    it('ignores an empty batch and empty key lists', async () => {
      const ix = await fresh();
      await ix.apply(A, []);
      await ix.apply(A, [{ op: 'store', keys: [], tier: 'GPU' }]);
      expect(await ix.listPods(M)).toEqual([]);
      await ix.upsertPodState(A, {});
      expect(await gpu(ix)).toEqual({ 'pod-a': 0 });
    });

    it('shares reservations between routers: listed from a time on, oldest first, until ended or too old', async () => {
      const ix = await fresh();
      const r = (router: string, id: number, atMs: number, podId = 'pod|a b') => ({
        router,
        id,
        podId,
        atMs,
        uncachedTokens: 1000 + id,
        promptTokens: 2000 + id,
      });
      const [a1, b1, a2] = [r('ra', 1, 10_000), r('rb', 1, 10_500, 'pod-b'), r('ra', 2, 11_000)];
      await ix.shareReservation(M, a1, 15_000);
      await ix.shareReservation(M, a2, 15_000);
      await ix.shareReservation(M, b1, 15_000);
      expect(await ix.sharedReservations(M, 0, 100)).toEqual([a1, b1, a2]);
      expect(await ix.sharedReservations(M, 10_500, 100)).toEqual([b1, a2]);
      expect(await ix.sharedReservations(M, 0, 2)).toEqual([b1, a2]); // the newest 2
      // A reader leaves its own out, from the same window: of the newest 2, rb's.
      expect(await ix.sharedReservations(M, 0, 100, 'ra')).toEqual([b1]);
      expect(await ix.sharedReservations(M, 0, 2, 'ra')).toEqual([b1]);
      expect(await ix.sharedReservations(M, 0, 1, 'ra')).toEqual([]);
      expect(await ix.sharedReservations(M, 0, 100, 'rb')).toEqual([a1, a2]);
      expect(await ix.sharedReservations(M, 10_500, 100, 'rb')).toEqual([a2]);
      expect(await ix.sharedReservations(M, 0, 100, 'r')).toEqual([a1, b1, a2]); // a prefix of an id is another router
      expect(await ix.sharedReservations('other-model', 0, 100)).toEqual([]);
      await ix.endReservation(M, b1);
      await ix.endReservation(M, r('rc', 9, 10_000)); // unknown: ignored
      expect(await ix.sharedReservations(M, 0, 100)).toEqual([a1, a2]);
      // Sharing one drops those more than its TTL older than it.
      const late = r('rb', 2, 25_500);
      await ix.shareReservation(M, late, 15_000);
      expect(await ix.sharedReservations(M, 0, 100)).toEqual([a2, late]);
      // Pods and blocks do not touch them.
      await ix.apply(A, [{ op: 'clear' }]);
      await ix.removePod(A);
      expect(await ix.sharedReservations(M, 0, 100)).toEqual([a2, late]);
    });

    it('hands a saved record over once, while nothing was applied to the pod since', async () => {
      const ix = await fresh();
      const keys = sys.slice(0, 3);
      expect(await ix.saveHandoff(A, 'unknown pod')).toBe(false);
      expect(await ix.takeHandoff(A)).toEqual({ kind: 'none' });
      await ix.upsertPodState(A, {});
      await ix.upsertPodState(B, {});
      await ix.apply(A, [{ op: 'store', keys, tier: 'GPU' }], { writer: 'w1', seq: 1 });
      const record = '{"v":1,"entries":[["ab",null,1,0,0]]}\n second line: ünïcode';
      expect(await ix.saveHandoff(A, 'first')).toBe(true);
      expect(await ix.saveHandoff(A, record)).toBe(true); // replaces
      expect(await ix.takeHandoff(B)).toEqual({ kind: 'none' });
      await ix.upsertPodState(A, { running: 3 }); // state is not blocks: still current
      await ix.apply(A, [{ op: 'store', keys, tier: 'GPU' }], { writer: 'w1', seq: 1 }); // a retry: skipped
      expect(await ix.takeHandoff(A)).toEqual({ kind: 'found', record });
      expect(await ix.takeHandoff(A)).toEqual({ kind: 'none' }); // read once
      expect(await gpu(ix, keys)).toEqual({ 'pod-a': 3, 'pod-b': 0 });
    });

    it('calls a handoff stale after any apply to the pod (a clear too); removePod drops it', async () => {
      const ix = await fresh();
      const keys = sys.slice(0, 2);
      await ix.upsertPodState(A, {});
      await ix.upsertPodState(B, {});
      for (const ops of [
        [{ op: 'store', keys, tier: 'GPU' }],
        [{ op: 'remove', keys, tier: 'GPU' }],
        [{ op: 'clear' }],
      ] as IndexOp[][]) {
        expect(await ix.saveHandoff(A, 'r')).toBe(true);
        await ix.apply(A, ops);
        expect(await ix.takeHandoff(A)).toEqual({ kind: 'stale' });
      }
      // Another pod's writes leave it current.
      expect(await ix.saveHandoff(A, 'r')).toBe(true);
      await ix.apply(B, [{ op: 'store', keys, tier: 'GPU' }]);
      expect(await ix.takeHandoff(A)).toEqual({ kind: 'found', record: 'r' });
      expect(await ix.saveHandoff(A, 'r')).toBe(true);
      await ix.removePod(A);
      await ix.upsertPodState(A, {});
      expect(await ix.takeHandoff(A)).toEqual({ kind: 'none' });
    });
  });
}
