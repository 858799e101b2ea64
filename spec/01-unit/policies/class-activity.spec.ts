import { describe, expect, it } from 'vitest';
import { ClassActivity, PROTECT_MS, SQUEEZE_MS } from '../../../src/policies/class-activity.js';

const chat = { priority: 100, objectiveMs: 4000, ownMs: 300 };

describe('class activity (policies/class-activity.ts)', () => {
  it('protects a class on the pods that served it, for PROTECT_MS', () => {
    const a = new ClassActivity();
    a.record('pod-a', chat, 1000);
    expect(a.recent('pod-a', 1000 + PROTECT_MS - 1)).toEqual([chat]);
    expect(a.recent('pod-b', 2000)).toEqual([]);
    expect(a.recent('pod-a', 1000 + PROTECT_MS)).toEqual([]);
    expect(a.squeezed(100, 1000)).toBe(false);
  });

  it('a squeezed class is protected on every pod for SQUEEZE_MS', () => {
    const a = new ClassActivity();
    a.record('pod-a', chat, 1000);
    a.squeeze(chat, 1000, true);
    expect(a.squeezed(100, 1000)).toBe(true);
    // Where it was served, with its own work; elsewhere with none known, as on a reserved pod.
    expect(a.recent('pod-a', 2000)).toEqual([chat]);
    expect(a.recent('pod-b', 2000)).toEqual([{ priority: 100, objectiveMs: 4000, ownMs: 0 }]);
    expect(a.recent('pod-b', 1000 + SQUEEZE_MS)).toEqual([]);
    expect(a.recent('pod-a', 1000 + SQUEEZE_MS)).toEqual([chat]);
  });

  it('the latest squeeze wins and the sweep forgets ended ones', () => {
    const a = new ClassActivity();
    a.squeeze(chat, 5000, true);
    a.squeeze(chat, 3000, false); // an older report does not shorten it
    expect(a.squeezed(100, 5000 + SQUEEZE_MS - 1)).toBe(true);
    a.sweep(5000 + SQUEEZE_MS);
    expect(a.squeezed(100, 5000 + SQUEEZE_MS - 1)).toBe(false);
    expect(a.recent('pod-z', 5000)).toEqual([]);
  });

  it("only a squeeze on this node's own evidence is said to the other nodes (no echo between nodes)", () => {
    const a = new ClassActivity();
    a.squeeze(chat, 1000, false);
    expect(a.squeezed(100, 1000)).toBe(true);
    expect(a.ownSqueezed(100, 1000)).toBe(false);
    a.squeeze(chat, 2000, true);
    expect(a.ownSqueezed(100, 2000 + SQUEEZE_MS - 1)).toBe(true);
    expect(a.ownSqueezed(100, 2000 + SQUEEZE_MS)).toBe(false);
  });
});
