// Overload by class: which pods a request may take without pushing a higher class past its TTFT objective.

/**
 * The Gateway API Inference Extension's class model: an integer priority, strict between priorities (a lower
 * class never costs a higher one its objective), negative = sheddable. Pure: the router gathers the facts
 * per pod (steps/admit-class.ts), this decides.
 */

/** A higher-class request already sent to the pod and still waiting for its first token. */
export interface PendingRequest {
  priority: number;
  objectiveMs: number;
  /** Its TTFT as predicted when it was booked, plus what later admissions were predicted to add to it. */
  expectedTtftMs: number;
}

/** A class recently served on the pod: its next request (a conversation's next turn) lands behind ours. */
export interface ProtectedClass {
  priority: number;
  objectiveMs: number;
  /** Its own work on the pod when last served there (prefill, load, overhead), ms: its TTFT on top of the wait. */
  ownMs?: number;
}

export interface PodFacts {
  podId: string;
  /** Healthy and within the ITL bound: only such pods are offered to another class. */
  eligible: boolean;
  /**
   * What this request adds in front of a request already queued there, ms (its prefill and CPU-tier load,
   * with the pod's latency correction): with chunked prefill the pod shares its step budget among prefills.
   */
  addedMs: number;
  /** What a request arriving just after this one would wait on the pod, ms (queue + this request's work). */
  waitBehindMs: number;
  pending: readonly PendingRequest[];
  protectedClasses: readonly ProtectedClass[];
  /** The request's own predicted TTFT on the pod, ms (a sheddable class is not sent past its own objective). */
  ownTtftMs?: number;
}

/** Why a pod refuses a request of a class: the first higher class it would push past its objective. */
export interface Blocked {
  podId: string;
  priority: number;
  objectiveMs: number;
  /** How far past the objective, ms (how long the pod needs to drain before it can take the request). */
  overMs: number;
  /**
   * `pending`: a request in flight; `protected`: the class's next request; `own`: the request itself (a
   * sheddable class's request would miss its own objective there: `priority` and `objectiveMs` are its own).
   */
  who: 'pending' | 'protected' | 'own';
}

/** The first higher class this pod would push past its objective if it took a request of `priority`; or null. */
export function blockedOn(priority: number, pod: PodFacts): Blocked | null {
  let worst: Blocked | null = null;
  const consider = (b: Blocked): void => {
    if (b.overMs > 0 && (worst === null || b.overMs > worst.overMs)) worst = b;
  };
  for (const r of pod.pending) {
    if (r.priority <= priority) continue;
    const overMs = r.expectedTtftMs + pod.addedMs - r.objectiveMs;
    consider({ podId: pod.podId, priority: r.priority, objectiveMs: r.objectiveMs, overMs, who: 'pending' });
  }
  for (const c of pod.protectedClasses) {
    if (c.priority <= priority) continue;
    const overMs = pod.waitBehindMs + (c.ownMs ?? 0) - c.objectiveMs;
    consider({
      podId: pod.podId,
      priority: c.priority,
      objectiveMs: c.objectiveMs,
      overMs,
      who: 'protected',
    });
  }
  return worst;
}

/**
 * A sheddable request on a pod where its own predicted TTFT is past its class's objective: it would miss the
 * objective anyway, and its queue there would keep every higher class off the pod for as long (bench:mixed,
 * seed 45: batch requests queued 60–99 s deep on a pod the chat then could not use). It waits or is shed
 * instead, as the Inference Extension sheds sheddable requests on a saturated pool.
 */
export function pastOwnObjective(
  priority: number,
  ownObjectiveMs: number | null,
  pod: PodFacts,
): Blocked | null {
  if (!sheddable(priority) || ownObjectiveMs === null || pod.ownTtftMs === undefined) return null;
  const overMs = pod.ownTtftMs - ownObjectiveMs;
  return overMs > 0 ? { podId: pod.podId, priority, objectiveMs: ownObjectiveMs, overMs, who: 'own' } : null;
}

export type ClassVerdict =
  /** The best pod takes it (no higher class there is hurt): nothing changes. */
  | { kind: 'best'; podIndex: number }
  /** The best pod would hurt a higher class; another pod does not: the index of the best such pod. */
  | { kind: 'moved'; podIndex: number; blocked: Blocked[] }
  /** No pod can take it without hurting a higher class. */
  | { kind: 'blocked'; blocked: Blocked[]; retryAfterMs: number };

/**
 * The class admission of a request of `priority` over pods ranked best first (index 0 is the router's
 * choice): the first eligible pod no higher class is hurt on, and, for a sheddable class with an objective
 * (`ownObjectiveMs`), where the request itself is predicted within it. The highest class present is never
 * blocked unless it is sheddable. `retryAfterMs`: the least any pod needs to drain before it could take it.
 */
export function admitByClass(
  priority: number,
  ranked: readonly PodFacts[],
  ownObjectiveMs: number | null = null,
): ClassVerdict {
  const blocked: Blocked[] = [];
  for (let i = 0; i < ranked.length; i++) {
    const pod = ranked[i]!;
    if (!pod.eligible) continue;
    const b = blockedOn(priority, pod) ?? pastOwnObjective(priority, ownObjectiveMs, pod);
    if (b === null) return i === 0 ? { kind: 'best', podIndex: 0 } : { kind: 'moved', podIndex: i, blocked };
    blocked.push(b);
  }
  if (blocked.length === 0) return { kind: 'best', podIndex: 0 };
  return { kind: 'blocked', blocked, retryAfterMs: Math.min(...blocked.map((b) => b.overMs)) };
}

/** Sheddable classes (negative priority) may be refused under overload; the others are always served. */
export function sheddable(priority: number): boolean {
  return priority < 0;
}
