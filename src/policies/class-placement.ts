// Reserved pods: a class is protected on them from the start, before it is first served and while it idles.
import { admitByClass, type ClassVerdict, type PodFacts } from './class-admission.js';
import type { ServiceClass } from './policy-config.js';

/**
 * Class admission keeps a lower class off a pod that served a higher class within PROTECT_MS
 * (class-activity.ts). Before a class is first served (and after it idled PROTECT_MS) no pod protects it: a
 * lower class's flood fills every pod, and the class's first requests queue behind it (bench:mixed-live: the
 * chat's first turns 5–23 s behind the flood's 16k prefills). A class's `reserved_pods` are protected as if
 * it had just been served there, always, so its first request finds a pod a lower class has not filled.
 * Pure, like class-admission.ts: the router gathers the facts (steps/admit-class.ts), this decides.
 */

/** FNV-1a of a pod id: the same order on every Kong node, without coordination. */
function podHash(podId: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < podId.length; i++) {
    h ^= podId.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/**
 * The classes each pod is reserved for, among `podIds` (the candidate pods of the request's model): the same
 * pods for every class (higher classes share them) and on every node, never all of them (the lowest class
 * always keeps a pod). A class with nothing below it reserves nothing: there is no one to keep off.
 */
export function reservedPods(
  classes: readonly ServiceClass[],
  podIds: readonly string[],
): Map<string, ServiceClass[]> {
  const out = new Map<string, ServiceClass[]>();
  if (podIds.length < 2 || classes.length === 0) return out;
  const lowest = Math.min(...classes.map((c) => c.priority));
  const order = [...podIds].sort((a, b) => podHash(b) - podHash(a) || (a < b ? -1 : 1));
  for (const c of classes) {
    if (c.priority <= lowest) continue;
    for (const podId of order.slice(0, Math.min(c.reserved_pods, podIds.length - 1))) {
      let l = out.get(podId);
      if (!l) out.set(podId, (l = []));
      l.push(c);
    }
  }
  return out;
}

/** A pod's facts with its reserved classes protected as if just served there (their own work unknown: 0). */
export function withReserved(pod: PodFacts, reserved: readonly ServiceClass[] | undefined): PodFacts {
  if (!reserved || reserved.length === 0) return pod;
  const protectedClasses = [...pod.protectedClasses];
  for (const c of reserved)
    if (!protectedClasses.some((p) => p.priority === c.priority))
      protectedClasses.push({ priority: c.priority, objectiveMs: c.ttft_objective_ms, ownMs: 0 });
  return { ...pod, protectedClasses };
}

/**
 * The class placement of a request of `priority` over pods ranked best first (the one entry point the router
 * calls): each pod's facts with the classes reserved on it (`classes`: the config's), then class admission.
 */
export function placeByClass(
  priority: number,
  classes: readonly ServiceClass[],
  ranked: readonly PodFacts[],
  /** The request's class objective, ms: a sheddable request is not placed past it (class-admission.ts). */
  ownObjectiveMs: number | null = null,
): ClassVerdict {
  // Every candidate pod, eligible now or not: a pod past the ITL bound for one request stays reserved.
  const reserved = reservedPods(
    classes,
    ranked.map((f) => f.podId),
  );
  return admitByClass(
    priority,
    ranked.map((f) => withReserved(f, reserved.get(f.podId))),
    ownObjectiveMs,
  );
}
