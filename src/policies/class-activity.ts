// Which classes each pod served recently: their next requests (a chat's next turn) will queue on that pod.
import type { ProtectedClass } from './class-admission.js';

/**
 * How long a pod keeps protecting a class after it last served one of its requests. A conversation's next
 * turn goes back to the pod holding its prefix, which must still be cached there: a lower class placed on the
 * pod meanwhile evicts it. 30 s (a human reading and typing) lapsed between turns in bench:mixed (turns ~33 s
 * apart) and the chat's next turns came back cold; 120 s kept them warm (docs/policies.md, Measured).
 */
export const PROTECT_MS = 120_000;

/** Per pod, the classes booked there within PROTECT_MS. Bounded by pods × classes (≤ 16 classes). */
export class ClassActivity {
  readonly #byPod = new Map<string, Map<number, { objectiveMs: number; ownMs: number; atMs: number }>>();

  /** The class was served on the pod at `nowMs` (another node's reservation may be older: the newest wins). */
  record(podId: string, cls: ProtectedClass, nowMs: number): void {
    let m = this.#byPod.get(podId);
    if (!m) this.#byPod.set(podId, (m = new Map()));
    const prev = m.get(cls.priority);
    if (prev && prev.atMs > nowMs) return;
    m.set(cls.priority, { objectiveMs: cls.objectiveMs, ownMs: cls.ownMs ?? 0, atMs: nowMs });
  }

  /** Classes served on the pod within PROTECT_MS. */
  recent(podId: string, nowMs: number): ProtectedClass[] {
    const m = this.#byPod.get(podId);
    if (!m) return [];
    const out: ProtectedClass[] = [];
    for (const [priority, v] of m)
      if (nowMs - v.atMs < PROTECT_MS) out.push({ priority, objectiveMs: v.objectiveMs, ownMs: v.ownMs });
    return out;
  }

  /** Forgets what is older than PROTECT_MS (the router's sweep). */
  sweep(nowMs: number): void {
    for (const [podId, m] of this.#byPod) {
      for (const [p, v] of m) if (nowMs - v.atMs >= PROTECT_MS) m.delete(p);
      if (m.size === 0) this.#byPod.delete(podId);
    }
  }

  get size(): number {
    return this.#byPod.size;
  }
}
