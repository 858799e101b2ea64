import { describe, expect, it } from 'vitest';
import type { PodLookup, PodState } from '../../../src/core/types.js';
import { defaultPodState } from '../../../src/index/index.js';
import { ContextWindows } from '../../../src/router/context-windows.js';

const pod = (podId: string, over: Partial<PodState>): PodLookup => ({
  state: { ...defaultPodState({ model: 'm', podId }), ...over },
  prefixBlocks: { GPU: 0, CPU: 0, STORAGE: 0 },
});

describe('ContextWindows', () => {
  it("takes the smallest window of the healthy pods, every pod's when none healthy reports one", () => {
    const w = new ContextWindows(undefined);
    expect(w.of('m')).toBeUndefined();
    expect(w.table()).toBeNull();
    const pods = [
      pod('a', { maxModelLen: 8192 }),
      pod('b', { maxModelLen: 4096 }),
      pod('c', { maxModelLen: 1024, healthy: false }),
      pod('d', { maxModelLen: 0 }),
    ];
    expect(w.learn('m', pods)).toBe(4096);
    expect(w.of('m')).toBe(4096);
    expect(w.learn('m', [pod('c', { maxModelLen: 1024, healthy: false }), pod('d', {})])).toBe(1024);
  });

  it('forgets a model whose pods report none, or that has no pods', () => {
    const w = new ContextWindows(undefined);
    w.learn('m', [pod('a', { maxModelLen: 8192 })]);
    expect(w.learn('m', [pod('a', {})])).toBeUndefined();
    w.learn('m', [pod('a', { maxModelLen: 8192 })]);
    expect(w.learn('m', [])).toBeUndefined();
    expect(w.table()).toBeNull();
  });

  it("keeps the config's window over the pods', and merges both into one table for the workers", () => {
    const configured = { m: 1000 };
    const w = new ContextWindows(configured);
    expect(w.table()).toBe(configured);
    expect(w.learn('m', [pod('a', { maxModelLen: 64 })])).toBe(1000);
    expect(w.table()).toBe(configured);
    w.learn('other', [pod('x', { maxModelLen: 64 })]);
    const t = w.table();
    expect({ ...t }).toEqual({ m: 1000, other: 64 });
    // The same object until a window changes (the worker settings are rebuilt only then).
    w.learn('other', [pod('x', { maxModelLen: 64 })]);
    expect(w.table()).toBe(t);
    w.learn('other', [pod('x', { maxModelLen: 32 })]);
    expect(w.table()).not.toBe(t);
    expect({ ...w.table() }).toEqual({ m: 1000, other: 32 });
  });

  it('does not find Object.prototype members as windows', () => {
    const w = new ContextWindows({ m: 1000 });
    expect(w.of('constructor')).toBeUndefined();
    expect(w.of('__proto__')).toBeUndefined();
  });
});
