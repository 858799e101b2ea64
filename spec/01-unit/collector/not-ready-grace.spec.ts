import { describe, expect, it } from 'vitest';
import { NotReadyGrace } from '../../../src/collector/discovery/not-ready-grace.js';
import type { PodSpec } from '../../../src/collector/pods.js';

const pod = (id: string, ready?: boolean): PodSpec => ({
  id,
  model: 'm',
  address: `${id}:8000`,
  topic: '',
  dataParallelSize: 1,
  ...(ready === undefined ? {} : { ready }),
});
const ids = (r: { pods: PodSpec[] }): string[] => r.pods.map((p) => p.id);

describe('NotReadyGrace', () => {
  it('keeps a pod that is not ready for the grace, counted from when it was first seen not ready', () => {
    const g = new NotReadyGrace(1000);
    expect(g.apply([pod('a'), pod('b', false)], 10_000)).toEqual({
      pods: [pod('a'), pod('b', false)],
      recheckAtMs: 11_000,
    });
    // A later list does not restart b's grace.
    expect(g.apply([pod('a'), pod('b', false)], 10_600)).toMatchObject({ recheckAtMs: 11_000 });
    expect(ids(g.apply([pod('a'), pod('b', false)], 10_999))).toEqual(['a', 'b']);
    expect(g.apply([pod('a'), pod('b', false)], 11_000)).toEqual({ pods: [pod('a')], recheckAtMs: null });
    // Still not ready: still dropped.
    expect(ids(g.apply([pod('a'), pod('b', false)], 50_000))).toEqual(['a']);
  });

  it('starts the grace afresh after the pod was ready or gone', () => {
    const g = new NotReadyGrace(1000);
    g.apply([pod('b', false), pod('c', false)], 0);
    g.apply([pod('b', true)], 900); // b ready again, c gone
    expect(g.apply([pod('b', false), pod('c', false)], 1500)).toEqual({
      pods: [pod('b', false), pod('c', false)],
      recheckAtMs: 2500,
    });
  });

  it('reports the earliest grace that ends', () => {
    const g = new NotReadyGrace(1000);
    g.apply([pod('b', false)], 0);
    expect(g.apply([pod('b', false), pod('c', false)], 300).recheckAtMs).toBe(1000);
  });

  it('with a grace of 0 drops a pod that is not ready at once', () => {
    const g = new NotReadyGrace(0);
    expect(g.apply([pod('a'), pod('b', false)], 5)).toEqual({ pods: [pod('a')], recheckAtMs: null });
  });
});
