import { describe, expect, it } from 'vitest';
import { approxPrefixArm } from '../../../bench/lib/arms/approx-prefix.js';
import { consistentHashArm } from '../../../bench/lib/arms/consistent-hash.js';
import { latencyEwmaArm } from '../../../bench/lib/arms/latency-ewma.js';
import { leastConnectionsArm, randomArm, roundRobinArm } from '../../../bench/lib/arms/simple.js';
import { kubeProxyArm } from '../../../bench/lib/arms/kube-proxy.js';
import type { ArmDecision, ArmRequest, PodView } from '../../../bench/lib/arms/types.js';
import { Rng } from '../../../bench/lib/rng.js';

const pods = (inFlight: number[] = [0, 0, 0], waiting: (number | null)[] = [null, null, null]): PodView[] =>
  inFlight.map((n, i) => ({ id: `p${i}`, inFlight: n, waiting: waiting[i] ?? null, kvUsage: null }));
const req = (first: string, ids: number[] = []): ArmRequest => ({
  key: first,
  body: '{}',
  promptTokenIds: ids,
  firstMessageText: first,
  client: 0,
});

describe('routing arms', () => {
  it('random is seeded and uses every pod', () => {
    const a = randomArm(new Rng(1));
    const b = randomArm(new Rng(1));
    const picks = Array.from({ length: 60 }, () => a.choose(req('x'), pods(), 0) as { podId: string });
    expect(
      Array.from({ length: 60 }, () => (b.choose(req('x'), pods(), 0) as { podId: string }).podId),
    ).toEqual(picks.map((p) => p.podId));
    expect(new Set(picks.map((p) => p.podId)).size).toBe(3);
  });

  it('kube-proxy behind a keep-alive pool: a client reuses its oldest live idle connection, else a new random pod', () => {
    const arm = kubeProxyArm(new Rng(3), 5000);
    const on = (client: number, t: number): ArmDecision =>
      arm.choose({ ...req('x'), client }, pods(), t) as ArmDecision;
    const done = (d: ArmDecision, t: number): void => arm.onComplete!(d, req('x'), t, 0, 0);
    const a = on(0, 0);
    const b = on(0, 10); // a is busy: a second connection
    done(b, 100);
    done(a, 200);
    // Both idle: the oldest connection (a's) is taken first, then b's, then a fresh one.
    const c = on(0, 300);
    expect(c.podId).toBe(a.podId);
    expect(c.token).toBe(a.token);
    const d = on(0, 301);
    expect(d.token).toBe(b.token);
    expect(on(0, 302).token).not.toBe(a.token);
    // Another client never shares the pool.
    done(c, 400);
    expect(on(1, 401).token).not.toBe(c.token);
    // Idle longer than the keep-alive: closed, so the request opens a new connection.
    expect(on(0, 400 + 5001).token).not.toBe(c.token);
    // Over many fresh connections every pod is used.
    const seen = new Set<string>();
    for (let i = 0; i < 60; i++) seen.add(on(9, i).podId); // none released: always new
    expect(seen.size).toBe(3);
  });

  it('round-robin cycles; least-connections takes the fewest in flight', () => {
    const rr = roundRobinArm();
    expect([0, 1, 2, 3].map(() => (rr.choose(req('x'), pods(), 0) as { podId: string }).podId)).toEqual([
      'p0',
      'p1',
      'p2',
      'p0',
    ]);
    const lc = leastConnectionsArm();
    expect((lc.choose(req('x'), pods([3, 1, 2]), 0) as { podId: string }).podId).toBe('p1');
  });

  it('latency (Kong EWMA) avoids the pod whose responses were slow, and forgets with time', () => {
    const arm = latencyEwmaArm();
    const d = (t: number): string => (arm.choose(req('x'), pods(), t) as { podId: string }).podId;
    arm.onComplete!({ podId: 'p0' }, req('x'), 1000, 20_000, 500);
    arm.onComplete!({ podId: 'p1' }, req('x'), 1000, 1_000, 500);
    arm.onComplete!({ podId: 'p2' }, req('x'), 1000, 5_000, 500);
    expect(d(1000)).toBe('p1');
    // Decayed toward zero; a fresh slow sample on p1 makes it worse than the old ones.
    arm.onComplete!({ podId: 'p1' }, req('x'), 60_000, 90_000, 500);
    expect(d(60_000)).not.toBe('p1');
  });

  it('consistent hashing sends a prefix to one pod and spreads distinct prefixes', () => {
    const arm = consistentHashArm(['p0', 'p1', 'p2']);
    const owner = (s: string): string => (arm.choose(req(s), pods(), 0) as { podId: string }).podId;
    expect(owner('system prompt A')).toBe(owner('system prompt A'));
    const owners = new Set(Array.from({ length: 60 }, (_, i) => owner(`prompt ${i}`)));
    expect(owners.size).toBe(3);
  });

  it('approximate prefix follows its own earlier decision for the same prefix', () => {
    const arm = approxPrefixArm({ model: 'm', blockTokens: 4, capacityBlocks: 100 });
    const ids = Array.from({ length: 64 }, (_, i) => i);
    const first = (arm.choose(req('a', ids), pods([0, 0, 0], [0, 0, 0]), 0) as { podId: string }).podId;
    // Same prefix, a different suffix; a bit more queue on the remembered pod does not outweigh 3× prefix score.
    const waiting = ['p0', 'p1', 'p2'].map((p) => (p === first ? 1 : 0));
    const again = arm.choose(req('a', [...ids, 99, 98, 97, 96]), pods([0, 0, 0], waiting), 0) as {
      podId: string;
    };
    expect(again.podId).toBe(first);
  });
});
