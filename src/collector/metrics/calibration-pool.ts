// Pools calibration and decode steps across like pods (same model and KV geometry) by their median.
import type { Calibration, DecodeSteps } from '../../core/types.js';
import { median } from '../../util/median.js';

/**
 * Pods of one model whose engines report the same KV geometry (num_gpu_blocks × block size) run on the same
 * GPU with the same vLLM settings, so they share one calibration.
 */
export function calibrationGroup(
  model: string,
  numGpuBlocks: number | null,
  blockSize: number | null,
): string {
  return `${model}|${numGpuBlocks ?? '?'}|${blockSize ?? '?'}`;
}

/**
 * What a group of like pods shares: per coefficient, the median of their own estimates.
 * A pod's own estimate follows its own traffic, so it drifts with the mix of prompts it served and goes stale
 * when the router sends it little; the pod looking slow then keeps it looking slow. Like pods do not differ
 * that way, and the median ignores the one that does.
 */
export class MedianPool<T> {
  /** group → member (pod and DP rank) → its own estimate. */
  readonly #groups = new Map<string, Map<string, T>>();
  readonly #groupOf = new Map<string, string>();

  /** `combine`: the group's estimate from two or more members' own. */
  constructor(readonly combine: (own: T[]) => T) {}

  /** Records a member's own estimate (null: none yet) under its current group. */
  set(member: string, group: string, own: T | null): void {
    const was = this.#groupOf.get(member);
    if (was !== undefined && was !== group) this.remove(member);
    this.#groupOf.set(member, group);
    let g = this.#groups.get(group);
    if (!g) this.#groups.set(group, (g = new Map()));
    if (own) g.set(member, own);
    else g.delete(member);
  }

  remove(member: string): void {
    const group = this.#groupOf.get(member);
    if (group === undefined) return;
    this.#groupOf.delete(member);
    const g = this.#groups.get(group);
    g?.delete(member);
    if (g && g.size === 0) this.#groups.delete(group);
  }

  /** Records a member's own estimate and returns what it should use: its group's, else its own. */
  share(member: string, group: string, own: T | null): T | null {
    this.set(member, group, own);
    return this.pooled(group) ?? own;
  }

  /** The group's shared estimate; null while no member has one. */
  pooled(group: string): T | null {
    const own = [...(this.#groups.get(group)?.values() ?? [])];
    if (own.length === 0) return null;
    return own.length === 1 ? own[0]! : this.combine(own);
  }
}

/** Like pods' calibration: the median prefill cost and decode step. */
export class CalibrationPool extends MedianPool<Calibration> {
  constructor() {
    super((own) => ({
      ...own[0]!,
      prefillMsPerToken: median(own.map((c) => c.prefillMsPerToken)),
      decodeStepMs: median(own.map((c) => c.decodeStepMs)),
    }));
  }
}

/** What a member writes: its group's calibration and decode steps, each its own while the group has none. */
export interface Shared {
  calibration: Calibration | null;
  decodeSteps: DecodeSteps | null;
}

/** The two pools like pods share (collector setting calibration_pool). */
export class CalibrationPools {
  readonly calibration = new CalibrationPool();
  readonly decodeSteps = new DecodeStepsPool();

  /** Records a member's own estimates and returns what it should write. */
  share(member: string, group: string, own: Shared): Shared {
    return {
      calibration: this.calibration.share(member, group, own.calibration),
      decodeSteps: this.decodeSteps.share(member, group, own.decodeSteps),
    };
  }

  remove(member: string): void {
    this.calibration.remove(member);
    this.decodeSteps.remove(member);
  }
}

/** Like pods' measured decode steps: per field, the median; the line from the members that have one. */
export class DecodeStepsPool extends MedianPool<DecodeSteps> {
  constructor() {
    super((all) => {
      const lines = all.flatMap((d) => (d.line ? [d.line] : []));
      return {
        contextTokens: median(all.map((d) => d.contextTokens)),
        stepMs: median(all.map((d) => d.stepMs)),
        intervals: all.reduce((a, d) => a + d.intervals, 0),
        line:
          lines.length === 0
            ? null
            : {
                baseMs: median(lines.map((l) => l.baseMs)),
                msPerContextToken: median(lines.map((l) => l.msPerContextToken)),
              },
      };
    });
  }
}
