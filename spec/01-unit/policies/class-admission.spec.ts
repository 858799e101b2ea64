import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  admitByClass,
  blockedOn,
  placeByClass,
  reservedPods,
  sheddable,
  type PodFacts,
  type ServiceClass,
} from '../../../src/policies/index.js';

const priority = fc.integer({ min: -5, max: 5 });
const ms = fc.double({ min: 0, max: 20_000, noNaN: true });

const pod = (i: number): fc.Arbitrary<PodFacts> =>
  fc.record({
    podId: fc.constant(`pod-${i}`),
    eligible: fc.boolean(),
    addedMs: ms,
    waitBehindMs: ms,
    pending: fc.array(
      fc.record({ priority, objectiveMs: fc.integer({ min: 1, max: 20_000 }), expectedTtftMs: ms }),
      {
        maxLength: 4,
      },
    ),
    protectedClasses: fc.array(
      fc.record({ priority, objectiveMs: fc.integer({ min: 1, max: 20_000 }), ownMs: ms }),
      {
        maxLength: 3,
      },
    ),
  });
const fleet = fc
  .integer({ min: 1, max: 5 })
  .chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => pod(i))));

/** Would placing a request of `p` on `f` push some higher class past its objective (the rule, restated)? */
function hurts(p: number, f: PodFacts): boolean {
  return (
    f.pending.some((r) => r.priority > p && r.expectedTtftMs + f.addedMs > r.objectiveMs) ||
    f.protectedClasses.some((c) => c.priority > p && f.waitBehindMs + (c.ownMs ?? 0) > c.objectiveMs)
  );
}

describe('class admission (policies/class-admission.ts)', () => {
  it('places a request on the best eligible pod where no higher class is pushed past its objective', () => {
    fc.assert(
      fc.property(priority, fleet, (p, pods) => {
        const v = admitByClass(p, pods);
        const ok = pods.findIndex((f) => f.eligible && !hurts(p, f));
        const anyEligible = pods.some((f) => f.eligible);
        if (ok >= 0) {
          expect(v.kind === 'blocked').toBe(false);
          if (v.kind !== 'blocked') expect(v.podIndex).toBe(ok === 0 ? 0 : ok);
          expect(v.kind).toBe(ok === 0 ? 'best' : 'moved');
        } else if (!anyEligible) {
          // Nothing eligible: not class admission's call (the router's own choice stands).
          expect(v).toEqual({ kind: 'best', podIndex: 0 });
        } else {
          expect(v.kind).toBe('blocked');
          if (v.kind === 'blocked') {
            expect(v.blocked.length).toBe(pods.filter((f) => f.eligible).length);
            expect(v.retryAfterMs).toBeGreaterThan(0);
          }
        }
      }),
    );
  });

  it('strict between priorities: what a class may take, every higher class may take too', () => {
    fc.assert(
      fc.property(priority, priority, fleet, (a, b, pods) => {
        const [lo, hi] = a <= b ? [a, b] : [b, a];
        for (const f of pods) if (blockedOn(lo, f) === null) expect(blockedOn(hi, f)).toBeNull();
      }),
    );
  });

  it('never blocks a request of the highest priority present, and only higher classes block', () => {
    fc.assert(
      fc.property(fleet, (pods) => {
        const top = Math.max(
          5,
          ...pods.flatMap((f) => [...f.pending, ...f.protectedClasses].map((c) => c.priority)),
        );
        const v = admitByClass(top, pods);
        expect(v.kind).not.toBe('blocked');
        if (v.kind === 'moved') expect(v.blocked).toEqual([]);
        for (const f of pods) {
          const b = blockedOn(-5, f);
          if (b) expect(b.priority).toBeGreaterThan(-5);
        }
      }),
    );
  });

  it('names the class it protects and by how much', () => {
    const f: PodFacts = {
      podId: 'pod-a',
      eligible: true,
      addedMs: 800,
      waitBehindMs: 1500,
      pending: [{ priority: 100, objectiveMs: 1000, expectedTtftMs: 400 }],
      protectedClasses: [],
    };
    expect(blockedOn(-1, f)).toEqual({
      podId: 'pod-a',
      priority: 100,
      objectiveMs: 1000,
      overMs: 200,
      who: 'pending',
    });
    expect(
      blockedOn(-1, { ...f, pending: [], protectedClasses: [{ priority: 100, objectiveMs: 1000 }] }),
    ).toMatchObject({
      overMs: 500,
      who: 'protected',
    });
    expect(blockedOn(100, f)).toBeNull();
  });

  it('a sheddable request is placed only where it is predicted within its own objective; others anywhere', () => {
    const withOwn = (i: number): fc.Arbitrary<PodFacts> =>
      fc
        .tuple(pod(i), fc.option(ms, { nil: undefined }))
        .map(([f, t]) => (t === undefined ? f : { ...f, ownTtftMs: t }));
    const fleetOwn = fc
      .integer({ min: 1, max: 5 })
      .chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => withOwn(i))));
    fc.assert(
      fc.property(
        priority,
        fleetOwn,
        fc.option(fc.integer({ min: 1, max: 20_000 }), { nil: null }),
        (p, pods, own) => {
          const past = (f: PodFacts): boolean =>
            sheddable(p) && own !== null && f.ownTtftMs !== undefined && f.ownTtftMs > own;
          const v = admitByClass(p, pods, own);
          const ok = pods.findIndex((f) => f.eligible && !hurts(p, f) && !past(f));
          if (ok >= 0) expect(v).toMatchObject({ kind: ok === 0 ? 'best' : 'moved', podIndex: ok });
          else if (pods.some((f) => f.eligible)) {
            expect(v.kind).toBe('blocked');
            if (v.kind === 'blocked')
              for (const b of v.blocked)
                if (b.who === 'own') {
                  expect(b.priority).toBe(p);
                  expect(b.objectiveMs).toBe(own);
                }
          }
          // Without an objective of its own the rule is the old one exactly.
          expect(admitByClass(p, pods, null)).toEqual(
            admitByClass(
              p,
              pods.map(({ ownTtftMs: _, ...f }) => f),
            ),
          );
        },
      ),
    );
  });

  it("names a sheddable request's own objective as the reason it waits", () => {
    const f: PodFacts = {
      podId: 'pod-a',
      eligible: true,
      addedMs: 0,
      waitBehindMs: 0,
      pending: [],
      protectedClasses: [],
      ownTtftMs: 45_000,
    };
    expect(admitByClass(-1, [f], 30_000)).toEqual({
      kind: 'blocked',
      blocked: [{ podId: 'pod-a', priority: -1, objectiveMs: 30_000, overMs: 15_000, who: 'own' }],
      retryAfterMs: 15_000,
    });
    expect(admitByClass(0, [f], 30_000).kind).toBe('best');
  });

  it('negative priorities are sheddable, zero and above are not (Gateway API Inference Extension)', () => {
    expect([-1000, -1, 0, 1, 100].map(sheddable)).toEqual([true, true, false, false, false]);
  });
});

describe('reserved pods (policies/class-placement.ts)', () => {
  const cls = (name: string, priority: number, reserved_pods: number): ServiceClass => ({
    name,
    priority,
    ttft_objective_ms: 1000,
    max_wait_ms: 0,
    reserved_pods,
  });
  const classesArb = fc
    .array(fc.record({ priority, reserved: fc.integer({ min: 0, max: 6 }) }), { minLength: 1, maxLength: 4 })
    .map((cs) => cs.map((c, i) => cls(`c${i}`, c.priority, c.reserved)));
  const podsArb = fc.uniqueArray(fc.stringMatching(/^pod-[a-z0-9]{1,6}$/), { minLength: 1, maxLength: 8 });

  it('the same pods whatever the order the pods come in, never all of them, and only for classes above the lowest', () => {
    fc.assert(
      fc.property(classesArb, podsArb, fc.nat(), (classes, pods, rot) => {
        const a = reservedPods(classes, pods);
        const rotated = [...pods.slice(rot % pods.length), ...pods.slice(0, rot % pods.length)];
        const b = reservedPods(classes, rotated);
        const names = (m: Map<string, ServiceClass[]>): string[] =>
          [...m].map(([p, cs]) => `${p}:${cs.map((c) => c.name).join(',')}`).sort();
        expect(names(b)).toEqual(names(a));
        expect(a.size).toBeLessThanOrEqual(Math.max(0, pods.length - 1));
        const lowest = Math.min(...classes.map((c) => c.priority));
        for (const c of classes) {
          const n = [...a.values()].filter((cs) => cs.includes(c)).length;
          expect(n).toBe(c.priority > lowest ? Math.min(c.reserved_pods, Math.max(0, pods.length - 1)) : 0);
        }
      }),
    );
  });

  it('a reserved pod refuses a lower class before its class is served there; a class with none reserves nothing', () => {
    const classes = [cls('interactive', 100, 1), cls('batch', -1, 0)];
    const idle = (podId: string): PodFacts => ({
      podId,
      eligible: true,
      addedMs: 3000,
      waitBehindMs: 3000,
      pending: [],
      protectedClasses: [],
    });
    const ranked = ['pod-a', 'pod-b', 'pod-c'].map(idle);
    const [reserved] = [...reservedPods(classes, ['pod-a', 'pod-b', 'pod-c']).keys()];
    const v = placeByClass(-1, classes, [
      ranked.find((p) => p.podId === reserved)!,
      ...ranked.filter((p) => p.podId !== reserved),
    ]);
    expect(v).toMatchObject({ kind: 'moved', podIndex: 1 });
    // Work within the reserved class's objective is still taken there, and the class itself always is.
    expect(placeByClass(-1, classes, [{ ...idle(reserved!), waitBehindMs: 900 }]).kind).toBe('best');
    expect(placeByClass(100, classes, ranked).kind).toBe('best');
    expect(placeByClass(-1, [cls('interactive', 100, 0), cls('batch', -1, 0)], ranked).kind).toBe('best');
  });
});
