// Which classes each pod served recently: their next requests (a chat's next turn) will queue on that pod.
import type { ProtectedClass } from './class-admission.js';

/**
 * How long a pod keeps protecting a class after it last served one of its requests. A conversation's next
 * turn goes back to the pod holding its prefix, which must still be cached there: a lower class placed on the
 * pod meanwhile evicts it. 30 s (a human reading and typing) lapsed between turns in bench:mixed (turns ~33 s
 * apart) and the chat's next turns came back cold; 120 s kept them warm (docs/policies.md, Measured).
 */
export const PROTECT_MS = 120_000;

/**
 * How long every pod protects a class after one of its requests was placed where it was predicted past its
 * objective, or was measured past it (the class is squeezed). Protection by activity alone never reaches a pod
 * the class has not been served on: a lower class's flood that filled a pod before the class came keeps its
 * queue long, so the class's requests all go elsewhere and the pod never protects it (bench:mixed, seeds
 * 44–46: the chat on one pod, its conversations evicting one another there, p95 8–60 s). While squeezed, no
 * pod takes lower-class work that would push the class's next request past its objective, so the flooded pods
 * drain until the class's own requests choose them. The measured TTFT counts because the prediction misses
 * exactly there (a turn credited with a prefix that queued requests evict before it runs). 30 s: a few of the
 * class's requests; 120 s did no better over the five seeds (docs/policies.md).
 */
export const SQUEEZE_MS = 30_000;

/** Per pod, the classes booked there within PROTECT_MS. Bounded by pods × classes (≤ 16 classes). */
export class ClassActivity {
  readonly #byPod = new Map<string, Map<number, { objectiveMs: number; ownMs: number; atMs: number }>>();
  /** Squeezed classes by priority: protected on every pod until `untilMs`; `ownUntilMs`: by this node's evidence. */
  readonly #squeezed = new Map<number, { objectiveMs: number; untilMs: number; ownUntilMs: number }>();

  /** The class was served on the pod at `nowMs` (another node's reservation may be older: the newest wins). */
  record(podId: string, cls: ProtectedClass, nowMs: number): void {
    let m = this.#byPod.get(podId);
    if (!m) this.#byPod.set(podId, (m = new Map()));
    const prev = m.get(cls.priority);
    if (prev && prev.atMs > nowMs) return;
    m.set(cls.priority, { objectiveMs: cls.objectiveMs, ownMs: cls.ownMs ?? 0, atMs: nowMs });
  }

  /**
   * Classes served on the pod within PROTECT_MS, and the classes squeezed now (on every pod; their own work
   * where they were not served is unknown: 0, as on a reserved pod).
   */
  recent(podId: string, nowMs: number): ProtectedClass[] {
    const m = this.#byPod.get(podId);
    const out: ProtectedClass[] = [];
    if (m)
      for (const [priority, v] of m)
        if (nowMs - v.atMs < PROTECT_MS) out.push({ priority, objectiveMs: v.objectiveMs, ownMs: v.ownMs });
    for (const [priority, s] of this.#squeezed)
      if (nowMs < s.untilMs && !out.some((c) => c.priority === priority))
        out.push({ priority, objectiveMs: s.objectiveMs, ownMs: 0 });
    return out;
  }

  /**
   * The class is squeezed from `nowMs`: one of its requests was predicted or measured past its objective. `own`:
   * by this node's evidence (shared with the other nodes on its next reservation of the class); false: another
   * node's, read from its reservation (not shared again, so a squeeze ends SQUEEZE_MS after its last evidence).
   */
  squeeze(cls: ProtectedClass, nowMs: number, own: boolean): void {
    const s = this.#squeezed.get(cls.priority) ?? { objectiveMs: cls.objectiveMs, untilMs: 0, ownUntilMs: 0 };
    const untilMs = nowMs + SQUEEZE_MS;
    s.objectiveMs = cls.objectiveMs;
    s.untilMs = Math.max(s.untilMs, untilMs);
    if (own) s.ownUntilMs = Math.max(s.ownUntilMs, untilMs);
    this.#squeezed.set(cls.priority, s);
  }

  /** A TTFT of the class, predicted or measured (`own`: by this node): past its objective, the class is squeezed. */
  judge(cls: ProtectedClass, ttftMs: number, nowMs: number, own: boolean): void {
    if (ttftMs > cls.objectiveMs) this.squeeze(cls, nowMs, own);
  }

  /** Whether this node's own evidence squeezes the class of `priority` now (it says so to the other nodes). */
  ownSqueezed(priority: number, nowMs: number): boolean {
    const s = this.#squeezed.get(priority);
    return s !== undefined && nowMs < s.ownUntilMs;
  }

  /** Whether the class of `priority` is squeezed now (for tests). */
  squeezed(priority: number, nowMs: number): boolean {
    const s = this.#squeezed.get(priority);
    return s !== undefined && nowMs < s.untilMs;
  }

  /** Forgets what is older than PROTECT_MS, and squeezes that ended (the router's sweep). */
  sweep(nowMs: number): void {
    for (const [podId, m] of this.#byPod) {
      for (const [p, v] of m) if (nowMs - v.atMs >= PROTECT_MS) m.delete(p);
      if (m.size === 0) this.#byPod.delete(podId);
    }
    for (const [p, s] of this.#squeezed) if (nowMs >= s.untilMs) this.#squeezed.delete(p);
  }

  get size(): number {
    return this.#byPod.size;
  }
}
