// The index port: ops, pod state, lookups and the four roles (reader, writer, reservations, handoff).
import type { BlockKey, LookupResult, PodId, PodState, Tier } from '../core/types.js';

/** One write applied to one pod, in order. */
export type IndexOp =
  | { op: 'store'; keys: BlockKey[]; tier: Tier }
  | { op: 'remove'; keys: BlockKey[]; tier: Tier }
  | { op: 'clear' };

/** Refcounts per (block, pod, tier) stop growing here (the Redis encoding gives each tier 10 bits). */
export const REFCOUNT_MAX = 1023;

export interface PodRef {
  model: string;
  podId: PodId;
}

/**
 * Identity of one apply, so that a retry of an apply that did run (a timeout, a dropped connection: the
 * caller cannot tell) is not counted twice. `writer` names who allocates the ids (src/index/apply-id.ts:
 * one per process); `seq` grows with every new apply of that writer, and a retry repeats it.
 */
export interface ApplyId {
  /** 1-64 of A-Z a-z 0-9 _ - */
  writer: string;
  /** A positive safe integer. */
  seq: number;
}

/** Why an index found that writes it had confirmed for a pod are gone (see IndexWriter.onWritesLost). */
export type IndexLossReason =
  /** The pod's apply record is gone: Redis restarted empty, or was flushed. */
  | 'missing'
  /** The record is older than the last write confirmed: Redis restarted from an older snapshot. */
  | 'rolled_back'
  /** Another writer's record: an older snapshot from before this process, or a second collector. */
  | 'overwritten';

export const INDEX_LOSS_REASONS: readonly IndexLossReason[] = ['missing', 'rolled_back', 'overwritten'];

/**
 * One router's recent assignment (src/router/reservations.ts), shared through the index with the routers
 * of the other Kong nodes: the work a pod's metrics do not show yet is then counted by every node.
 */
export interface SharedReservation {
  /** The router that made it: one id per router (plugin-server process and config). */
  router: string;
  /** Unique within its router. */
  id: number;
  podId: PodId;
  atMs: number;
  uncachedTokens: number;
  promptTokens: number;
  /** The service class it was booked with (policies only): the other nodes' class admission counts it. */
  cls?: SharedClass;
}

/** A shared reservation's class: what another node's class admission needs to protect it. */
export interface SharedClass {
  priority: number;
  objectiveMs: number;
  /** Its TTFT as predicted when booked, ms. */
  expectedTtftMs: number;
  /** Its own work on the pod (prefill, load, overhead), ms: a later request of its class pays about as much. */
  ownMs: number;
  /**
   * The booking node had the class squeezed by its own evidence (a TTFT it measured or predicted past the
   * objective, policies/class-activity.ts): the other nodes squeeze it too. Absent: false.
   */
  squeezed?: boolean;
}

/**
 * A collector's handoff for one pod, as the next collector takes it (HandoffStore.takeHandoff): the record, or
 * why there is none to resume from. `stale`: one was saved, but the pod was written, cleared or removed
 * since, so it no longer describes the index.
 */
export type HandoffTake = { kind: 'found'; record: string } | { kind: 'none' } | { kind: 'stale' };

/**
 * The router's side of the index: what pods of a model hold of a prompt, and their state. Read-only.
 *
 * - `lookup(model, keys)` returns every pod registered for `model` (via IndexWriter.upsertPodState) with, per
 *   tier, the length of the prefix of `keys` found by the chain search below, and the pod's state. Pods come
 *   sorted by podId; empty `keys` gives zero prefixes and every pod's state.
 * - The search probes block n−1 for growing n (1, 2, 4, …) until a miss, then binary-searches between the
 *   last hit and the first miss. It is exact when a pod's blocks are prefix-closed (vLLM evicts tail blocks
 *   first, so they nearly always are); both backends run the same search, so they agree on every input.
 * - prefixBlocks[tier] counts blocks held in that tier or a faster one. Each tier runs the search on its own;
 *   the results are then clamped so GPU ≤ CPU ≤ STORAGE always holds (src/index/prefix-search.ts).
 * - Atomic: one consistent snapshot of the model's pods, blocks and states, never half of an apply.
 * - Cost: ONE round trip on Redis (one script), within the lookup budget (lookupTimeoutMs: the plugin's
 *   per-request deadline); O(pods + log(keys)) block reads.
 */
export interface IndexReader {
  lookup(model: string, keys: readonly BlockKey[]): Promise<LookupResult>;
  /**
   * Pods registered for a model with their state, sorted by podId: the lookup without keys, under the
   * writers' budget (commandTimeoutMs) rather than the per-request one. One round trip.
   */
  listPods(model: string): Promise<PodState[]>;
}

/**
 * The collector's side: block writes and pod state, for one pod at a time.
 *
 * - Blocks are reference-counted per (block, pod, tier): vLLM may store a hash twice and remove it once.
 *   A remove of a block the pod does not hold is ignored. Counts saturate at REFCOUNT_MAX (Redis packs
 *   them into 10 bits); a remove only touches the tier it names.
 * - `clear` drops every block of the pod in O(1) (a per-pod epoch), keeping its state.
 * - A pod written by `apply` but never by `upsertPodState` is not registered: lookups do not list it, but
 *   its blocks are kept and show up once it registers.
 * - `apply(pod, ops, id)` with an ApplyId runs at most once: it is skipped whole when the last id applied
 *   to the pod has the same writer and a seq ≥ id.seq (a retry of an apply that ran, or an older one).
 *   Only the pod's last id is remembered (a retry must come before the next apply of that pod, as the
 *   collector's apply queue does); `removePod` forgets it, `clear` does not. An apply that changes nothing
 *   (no ops, or only empty key lists) records no id. Without an id, an apply gets a fresh one
 *   (nextApplyId() in src/index/apply-id.ts).
 * - Atomicity: ops apply in order; an apply is atomic up to maxKeysPerCall block keys (Redis: one script
 *   call; bigger ones become several calls in order, each recorded, so a retry skips those that ran).
 *   `upsertPodState` and `removePod` are atomic.
 * - Cost on Redis: one script call per 8,192 block keys; upsertPodState and removePod one each, O(1).
 * - Keys are never prompt text or token ids.
 * - A fenced Redis index (the collector's) rejects each write with KINF_ERR_LEASE_LOST when another
 *   process holds the model's writer lease, and changes nothing.
 */
export interface IndexWriter {
  apply(pod: PodRef, ops: readonly IndexOp[], id?: ApplyId): Promise<void>;
  /** Merges the given fields into the pod's state, registering the pod for its model if new. */
  upsertPodState(pod: PodRef, state: Partial<Omit<PodState, 'podId' | 'model'>>): Promise<void>;
  /** Unregisters the pod and drops its blocks, its apply id and its handoff (a pod that left the fleet). */
  removePod(pod: PodRef): Promise<void>;
  /**
   * Calls `listener` when the index finds that writes it had confirmed for `pod` are gone (Redis
   * restarted empty or from an older snapshot, or was flushed): the owner should clear the pod and
   * rebuild it. Returns the unsubscribe function. The memory index never loses writes and does not
   * implement it. Costs nothing per call; Redis checks on every apply, after every reconnection and
   * every verifyIntervalMs (one HMGET per model).
   */
  onWritesLost?(pod: PodRef, listener: (reason: IndexLossReason) => void): () => void;
}

/**
 * Routers' recent assignments, shared through the index with the routers of the other Kong nodes. They
 * are independent of pods and blocks; losing them costs only accuracy, so callers treat them as best
 * effort (src/router/shared-reservations.ts).
 *
 * - `sharedReservations(model, sinceMs, limit, exceptRouter)` takes the newest `limit` of those shared for
 *   the model (by any router) with atMs ≥ sinceMs and not ended, and lists them oldest first, less those
 *   of router `exceptRouter` (the reader's own; the window is the same).
 * - Sharing one with `ttlMs` drops those more than ttlMs older than it.
 * - Cost on Redis: one round trip each (share: one MULTI; read: one script, in the lookup budget, so the
 *   router runs it beside the lookup).
 */
export interface ReservationStore {
  /** Shares a router's reservation with every router reading this index, for at most `ttlMs`. */
  shareReservation(model: string, r: SharedReservation, ttlMs: number): Promise<void>;
  /** Ends a shared reservation before its TTL (its response was seen); an unknown one is ignored. */
  endReservation(model: string, r: SharedReservation): Promise<void>;
  /**
   * Of the newest `limit` shared reservations of `model` made at or after `sinceMs`, by any router, those not
   * made by `exceptRouter`, oldest first.
   */
  sharedReservations(
    model: string,
    sinceMs: number,
    limit: number,
    exceptRouter?: string,
  ): Promise<SharedReservation[]>;
}

/**
 * A stopping collector's record of each pod's stream, for the next collector (src/collector/handoff.ts).
 *
 * - `saveHandoff(pod, record)` keeps one opaque record per known pod (false: the pod is unknown); saving
 *   again replaces it. `takeHandoff(pod)` returns it once and deletes it (atomic: two takers never both
 *   get it). It is `stale` if anything was applied to the pod (a clear included) after the save;
 *   IndexWriter.removePod drops it.
 * - Redis gives it the blocks' TTL, and also refuses (false) a record saved after a write this index did
 *   not make landed on the pod: the record describes the pod as of this index's last confirmed write
 *   (checked in spec/02-integration).
 * - Cost on Redis: one script call each, plus one command per MiB of record (no command copies more, so a
 *   large record never stalls the routers' lookups).
 */
export interface HandoffStore {
  /** Keeps a stopping collector's record of the pod's stream for the next one; false if the pod is unknown. */
  saveHandoff(pod: PodRef, record: string): Promise<boolean>;
  /** The pod's handoff, once: a second take finds none. */
  takeHandoff(pod: PodRef): Promise<HandoffTake>;
}

/**
 * The KV-location index: which pod holds which block keys, in which tier, plus each pod's state, in four
 * roles. A backend implements them all (MemoryKvIndex, RedisKvIndex; spec/conformance/kv-index.ts checks
 * the contract on both); a caller asks only for the roles it uses: the router an IndexReader and a
 * ReservationStore, the collector an IndexWriter and a HandoffStore (and IndexReader.listPods to find the
 * pods it owns). Whoever created the index (createKvIndex) closes it.
 */
export interface KvIndex extends IndexReader, IndexWriter, ReservationStore, HandoffStore {
  /** Stops its timers and closes its connection. */
  close(): Promise<void>;
}

export function defaultPodState(pod: PodRef): PodState {
  return {
    podId: pod.podId,
    model: pod.model,
    address: '',
    healthy: true,
    running: 0,
    waiting: 0,
    kvUsage: 0,
    kvCapacityTokens: 0,
    meanQueuedPrefillTokens: 0,
    maxModelLen: 0,
    calibration: null,
    decodeSteps: null,
    lastEventAtMs: 0,
    lastScrapeAtMs: 0,
    resyncing: false,
    partialSinceMs: 0,
  };
}
