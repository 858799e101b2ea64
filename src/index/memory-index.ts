// MemoryKvIndex, the in-process reference index: the conformance oracle, also for tests and tools.
import { TIERS, tierRank, type BlockKey, type LookupResult, type PodState } from '../core/types.js';
import {
  REFCOUNT_MAX,
  defaultPodState,
  type ApplyId,
  type HandoffTake,
  type IndexOp,
  type KvIndex,
  type PodRef,
  type SharedReservation,
} from './kv-index.js';
import { nextApplyId } from './apply-id.js';
import { comparePodIds } from './pod-order.js';
import { tierPrefixes } from './prefix-search.js';

/** Refcounts of one (block, pod), one per tier in TIERS order. */
type Counts = [number, number, number];

interface PodEntry {
  /** null until upsertPodState registers the pod; blocks written before that are kept. */
  state: PodState | null;
  blocks: Map<BlockKey, Counts>;
  /** The last ApplyId applied (a retry of it, or an older one of the same writer, is skipped). */
  applied: ApplyId | null;
  /** A collector's handoff, with the apply record it was saved under (each apply that runs makes a new one). */
  handoff: { record: string; applied: ApplyId | null } | null;
}

/**
 * The reference KvIndex, written from the contract in kv-index.ts and nothing else: it is the oracle of
 * the differential test (spec/conformance/differential.ts). Single process, no persistence; also serves
 * tests and single-node demos (`index: memory`).
 */
export class MemoryKvIndex implements KvIndex {
  readonly #models = new Map<string, Map<string, PodEntry>>();
  /** Per model: shared reservations, in the order shared. */
  readonly #reservations = new Map<string, SharedReservation[]>();

  #entry(pod: PodRef): PodEntry {
    let pods = this.#models.get(pod.model);
    if (!pods) this.#models.set(pod.model, (pods = new Map()));
    let e = pods.get(pod.podId);
    if (!e) pods.set(pod.podId, (e = { state: null, blocks: new Map(), applied: null, handoff: null }));
    return e;
  }

  async apply(pod: PodRef, ops: readonly IndexOp[], id: ApplyId = nextApplyId()): Promise<void> {
    // An apply that changes nothing records no id either.
    if (!ops.some((op) => op.op === 'clear' || op.keys.length > 0)) return;
    const e = this.#entry(pod);
    if (e.applied && e.applied.writer === id.writer && e.applied.seq >= id.seq) return; // ran already
    e.applied = { writer: id.writer, seq: id.seq };
    for (const op of ops) {
      if (op.op === 'clear') {
        e.blocks = new Map(); // O(1) for the caller, like the Redis epoch bump
        continue;
      }
      const t = tierRank(op.tier);
      for (const key of op.keys) {
        let c = e.blocks.get(key);
        if (op.op === 'store') {
          if (!c) e.blocks.set(key, (c = [0, 0, 0]));
          c[t] = Math.min(REFCOUNT_MAX, c[t]! + 1);
        } else if (c && c[t]! > 0) {
          c[t] = c[t]! - 1; // a remove of an unheld block is ignored
          if (c[0] === 0 && c[1] === 0 && c[2] === 0) e.blocks.delete(key);
        }
      }
    }
  }

  async upsertPodState(pod: PodRef, state: Partial<Omit<PodState, 'podId' | 'model'>>): Promise<void> {
    const e = this.#entry(pod);
    const next = { ...(e.state ?? defaultPodState(pod)) } as unknown as Record<string, unknown>;
    for (const [k, v] of Object.entries(state)) {
      // Only PodState's own fields; identity comes from the PodRef.
      if (v !== undefined && k in next && k !== 'podId' && k !== 'model') next[k] = structuredClone(v);
    }
    e.state = next as unknown as PodState;
  }

  async removePod(pod: PodRef): Promise<void> {
    this.#models.get(pod.model)?.delete(pod.podId);
  }

  async saveHandoff(pod: PodRef, record: string): Promise<boolean> {
    const e = this.#models.get(pod.model)?.get(pod.podId);
    if (!e) return false;
    e.handoff = { record, applied: e.applied };
    return true;
  }

  async takeHandoff(pod: PodRef): Promise<HandoffTake> {
    const e = this.#models.get(pod.model)?.get(pod.podId);
    const h = e?.handoff ?? null;
    if (!e || h === null) return { kind: 'none' };
    e.handoff = null;
    return h.applied === e.applied ? { kind: 'found', record: h.record } : { kind: 'stale' };
  }

  async lookup(model: string, keys: readonly BlockKey[]): Promise<LookupResult> {
    const registered = this.#registered(model);
    return {
      pods: registered.map(([, e]) => ({
        state: structuredClone(e.state!),
        prefixBlocks: tierPrefixes(keys.length, (i) => fastestTier(e.blocks.get(keys[i]!))),
      })),
    };
  }

  async listPods(model: string): Promise<PodState[]> {
    return this.#registered(model).map(([, e]) => structuredClone(e.state!));
  }

  async shareReservation(model: string, r: SharedReservation, ttlMs: number): Promise<void> {
    // Those older than ttlMs before this one go as it comes, as in Redis.
    const live = (this.#reservations.get(model) ?? []).filter((x) => x.atMs >= r.atMs - ttlMs);
    live.push({ ...r });
    this.#reservations.set(model, live);
  }

  async endReservation(model: string, r: SharedReservation): Promise<void> {
    const list = this.#reservations.get(model);
    if (!list) return;
    const i = list.findIndex((x) => x.router === r.router && x.id === r.id);
    if (i >= 0) list.splice(i, 1);
  }

  async sharedReservations(
    model: string,
    sinceMs: number,
    limit: number,
    exceptRouter?: string,
  ): Promise<SharedReservation[]> {
    const live = (this.#reservations.get(model) ?? [])
      .filter((x) => x.atMs >= sinceMs)
      .map((x) => ({ ...x }))
      .sort((a, b) => a.atMs - b.atMs);
    return live.slice(Math.max(0, live.length - limit)).filter((x) => x.router !== exceptRouter);
  }

  async close(): Promise<void> {
    this.#models.clear();
    this.#reservations.clear();
  }

  #registered(model: string): [string, PodEntry][] {
    const pods = this.#models.get(model);
    if (!pods) return [];
    return [...pods].filter(([, e]) => e.state !== null).sort(([a], [b]) => comparePodIds(a, b));
  }
}

function fastestTier(c: Counts | undefined): number | undefined {
  if (!c) return undefined;
  for (let t = 0; t < TIERS.length; t++) if (c[t]! > 0) return t;
  return undefined;
}
