import { describe, expect, it } from 'vitest';
import { ClassActivity, PROTECT_MS, SQUEEZE_MS } from '../../../src/policies/class-activity.js';

const chat = { priority: 100, objectiveMs: 4000, ownMs: 300 };

describe('class activity (policies/class-activity.ts)', () => {
  it('protects a class on the pods that served it, for PROTECT_MS', () => {
    const a = new ClassActivity();
    a.record('pod-a', chat, 1000, 500);
    expect(a.recent('pod-a', 1000 + PROTECT_MS - 1)).toEqual([chat]);
    expect(a.recent('pod-b', 2000)).toEqual([]);
    expect(a.recent('pod-a', 1000 + PROTECT_MS)).toEqual([]);
    expect(a.squeezed(100, 1000)).toBe(false);
  });

  it('a request predicted past its objective squeezes its class: every pod protects it for SQUEEZE_MS', () => {
    const a = new ClassActivity();
    a.record('pod-a', chat, 1000, 4001);
    expect(a.squeezed(100, 1000)).toBe(true);
    // Where it was served, with its own work; elsewhere with none known, as on a reserved pod.
    expect(a.recent('pod-a', 2000)).toEqual([chat]);
    expect(a.recent('pod-b', 2000)).toEqual([{ priority: 100, objectiveMs: 4000, ownMs: 0 }]);
    expect(a.recent('pod-b', 1000 + SQUEEZE_MS)).toEqual([]);
    expect(a.recent('pod-a', 1000 + SQUEEZE_MS)).toEqual([chat]);
  });

  it('a measured TTFT past the objective squeezes too; the latest squeeze wins and the sweep forgets ended ones', () => {
    const a = new ClassActivity();
    a.squeeze(chat, 5000);
    a.squeeze(chat, 3000); // an older report does not shorten it
    expect(a.squeezed(100, 5000 + SQUEEZE_MS - 1)).toBe(true);
    a.sweep(5000 + SQUEEZE_MS);
    expect(a.squeezed(100, 5000 + SQUEEZE_MS - 1)).toBe(false);
    expect(a.recent('pod-z', 5000)).toEqual([]);
  });

  it('a prediction within the objective squeezes nothing', () => {
    const a = new ClassActivity();
    a.record('pod-a', chat, 0, 4000);
    a.record('pod-a', chat, 0);
    expect(a.squeezed(100, 0)).toBe(false);
  });
});
