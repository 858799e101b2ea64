import { randomBytes } from 'node:crypto';
import { KinferenceError } from '../core/errors.js';
import type { BlockKey, LookupResult, PodState } from '../core/types.js';
import {
  compareApplyRecords,
  formatApplyRecord,
  lossReason,
  nextApplyId,
  parseApplyRecord,
  type ApplyRecord,
} from './apply-id.js';
import type {
  ApplyId,
  HandoffTake,
  IndexLossReason,
  IndexOp,
  KvIndex,
  PodRef,
  SharedReservation,
} from './kv-index.js';
import { APPLY_LUA, APPLY_REPLY } from './lua/apply.js';
import { notLeaseHolderReply } from './lua/fence.js';
import { SAVE_HANDOFF_LUA, TAKE_HANDOFF_LUA } from './lua/handoff.js';
import { LOOKUP_LUA } from './lua/lookup.js';
import { REMOVE_POD_LUA, UPSERT_POD_LUA } from './lua/pods.js';
import { SHARED_RESERVATIONS_LUA } from './lua/reservations.js';
import { parseLookupReply } from './lookup-reply.js';
import type { PodStatePatch } from './pod-state-codec.js';
import {
  RedisConnection,
  asIndexError,
  withDeadline,
  type IndexLog,
  type RedisConnectionOptions,
} from './redis-connection.js';
import {
  DEFAULT_KEY_PREFIX,
  appliedKey,
  checkKeyPrefix,
  modelKeyBase,
  handoffTransferKey,
  podsKey,
  reservationsKey,
} from './redis-keys.js';
import { parseReservationMember, reservationMember } from './reservation-member.js';
import { RedisScript, type ScriptCall } from './script.js';
import { applyCalls, lookupCall, removePodCall, handoffCall, upsertPodCall } from './script-args.js';
import { LeaseLostError } from './writer-lease.js';

export interface RedisKvIndexOptions extends RedisConnectionOptions {
  /** redis://[user:password@]host:port/db or rediss:// (TLS). */
  url: string;
  /** First part of every key (default "kinf"); the collector and every plugin must agree on it. */
  keyPrefix?: string;
  /** Budget of one lookup, readiness and a NOSCRIPT reload included (default 25, the plugin's). */
  lookupTimeoutMs?: number;
  /** Budget of writes and listPods (default 2000). */
  commandTimeoutMs?: number;
  /** TTL of a block key, refreshed on every store; 0 = none (default 86400). A safety net only. */
  blockTtlSeconds?: number;
  /** Block keys per apply script call; bigger batches become several calls, in order (default 8192). */
  maxKeysPerCall?: number;
  /**
   * How often a writer checks that Redis still holds what it wrote (besides after every reconnection and
   * on every apply); 0 = only then (default 5000). Costs one HMGET per model; nothing until the first apply.
   */
  verifyIntervalMs?: number;
  /**
   * The writer fence (src/index/lua/fence.ts): `holderValue` is what this process's writer lease writes
   * in each model's lease key (formatLeaseHolder(holder)). Every write script then checks, atomically,
   * that the model's lease key holds it (or is absent), and otherwise changes nothing: the write rejects
   * with KINF_ERR_LEASE_LOST (a LeaseLostError). Without it (default) nothing is checked.
   */
  fence?: { holderValue: string };
}

export const REDIS_INDEX_DEFAULTS = {
  keyPrefix: DEFAULT_KEY_PREFIX,
  lookupTimeoutMs: 25,
  commandTimeoutMs: 2000,
  blockTtlSeconds: 86_400,
  maxKeysPerCall: 8192,
  verifyIntervalMs: 5000,
} as const;

/** A pod this index has written: the last apply record it saw confirmed, and who wants to hear of a loss. */
interface Written {
  pod: PodRef;
  /** null until an apply is confirmed, and again after a loss (the rebuild starts from scratch). */
  floor: ApplyRecord | null;
  /** Bumped on each loss: a check sent before it must not report the same loss again. */
  losses: number;
  listeners: Set<(reason: IndexLossReason) => void>;
}

const LOSS_REPLY: Record<number, IndexLossReason> = {
  [APPLY_REPLY.missing]: 'missing',
  [APPLY_REPLY.rolledBack]: 'rolled_back',
  [APPLY_REPLY.overwritten]: 'overwritten',
};

/** What each loss reason usually means, for the log line. */
const LOSS_CAUSE: Record<IndexLossReason, string> = {
  missing: 'restarted empty, or flushed',
  rolled_back: 'restarted from an older snapshot',
  overwritten:
    'another writer wrote the pod: one without the writer lease (an unfenced index), a collector that lost its lease and wrote while the lease key was missing, or a snapshot from before this process',
};

/** Removed pods remembered, to remove again if an older snapshot brings them back. */
const MAX_REMEMBERED_REMOVALS = 1024;

export const SCRIPTS = {
  lookup: new RedisScript('lookup', LOOKUP_LUA),
  apply: new RedisScript('apply', APPLY_LUA),
  upsertPod: new RedisScript('upsert-pod', UPSERT_POD_LUA),
  removePod: new RedisScript('remove-pod', REMOVE_POD_LUA),
  saveHandoff: new RedisScript('save-handoff', SAVE_HANDOFF_LUA),
  takeHandoff: new RedisScript('take-handoff', TAKE_HANDOFF_LUA),
  sharedReservations: new RedisScript('shared-reservations', SHARED_RESERVATIONS_LUA),
} as const;

const MAX_CACHED_MODELS = 4096;
/** Handoff records move in pieces of this size (see saveHandoff). */
const HANDOFF_CHUNK_BYTES = 1 << 20;
/** A record in transfer outlives a client that dies midway by at most this long. */
const HANDOFF_TRANSFER_TTL_MS = 60_000;

/**
 * The KvIndex in Redis (layout in redis-keys.ts, scripts in lua/). Every operation is one script call
 * (apply: one per maxKeysPerCall keys). Never hangs: lookups reject with KINF_ERR_REDIS_TIMEOUT past
 * lookupTimeoutMs, and with KINF_ERR_REDIS at once while Redis is down.
 *
 * Writes are exactly once (an ApplyId per apply, checked by the script) and their loss is detected: for
 * every pod it wrote, the index remembers the last apply record Redis confirmed, and checks that Redis
 * still holds it (or a later one) on every apply, after every reconnection and every verifyIntervalMs.
 * If not (Redis restarted empty or from an older snapshot, or was flushed), it tells the pod's
 * onWritesLost listeners, which rebuild the pod. Pods it removed are checked too, and removed again if a
 * snapshot brings them back.
 *
 * With `fence` (the collector's), every write is fenced by the writer lease (src/index/lua/fence.ts): a
 * process whose lease another holds cannot write, even before its renewal notices; KINF_ERR_LEASE_LOST.
 */
export class RedisKvIndex implements KvIndex {
  readonly #conn: RedisConnection;
  readonly #prefix: string;
  readonly #lookupTimeoutMs: number;
  readonly #commandTimeoutMs: number;
  readonly #ttlSeconds: number;
  readonly #maxKeysPerCall: number;
  readonly #verifyIntervalMs: number;
  readonly #log: IndexLog | null;
  /** The lease holder value the write scripts check (null: unfenced). */
  readonly #fence: string | null;
  readonly #bases = new Map<string, string>();
  /** base → podId → what this index wrote for the pod. */
  readonly #written = new Map<string, Map<string, Written>>();
  /** base → podId → model, in removal order (bounded). */
  readonly #removed = new Map<string, Map<string, string>>();
  #removedCount = 0;
  #verifyTimer: NodeJS.Timeout | null = null;
  #verifying = false;
  #verifyAgain = false;
  #closed = false;
  /** Losses since the first of a burst (logged at once; these are summed up when the burst ends). */
  #lossReport: {
    timer: NodeJS.Timeout;
    pods: string[];
    reasons: Partial<Record<IndexLossReason, number>>;
  } | null = null;

  constructor(opts: RedisKvIndexOptions) {
    const o = { ...REDIS_INDEX_DEFAULTS, ...definedOnly(opts) };
    checkKeyPrefix(o.keyPrefix);
    for (const [name, v, min] of [
      ['lookupTimeoutMs', o.lookupTimeoutMs, 1],
      ['commandTimeoutMs', o.commandTimeoutMs, 1],
      ['blockTtlSeconds', o.blockTtlSeconds, 0],
      ['maxKeysPerCall', o.maxKeysPerCall, 1],
      ['verifyIntervalMs', o.verifyIntervalMs, 0],
    ] as const) {
      if (!Number.isInteger(v) || v < min)
        throw new KinferenceError('KINF_ERR_CONFIG', `${name} must be an integer >= ${min}, got ${v}`);
    }
    this.#prefix = o.keyPrefix;
    this.#lookupTimeoutMs = o.lookupTimeoutMs;
    this.#commandTimeoutMs = o.commandTimeoutMs;
    this.#ttlSeconds = o.blockTtlSeconds;
    this.#maxKeysPerCall = o.maxKeysPerCall;
    this.#verifyIntervalMs = o.verifyIntervalMs;
    this.#log = opts.log ?? null;
    if (opts.fence !== undefined && (typeof opts.fence.holderValue !== 'string' || !opts.fence.holderValue))
      throw new KinferenceError('KINF_ERR_CONFIG', 'fence.holderValue must be a non-empty string');
    this.#fence = opts.fence?.holderValue ?? null;
    this.#conn = new RedisConnection(opts.url, opts);
    this.#conn.onReady((reconnected) => {
      // A reconnection may be to a Redis that restarted (empty, or from a snapshot): check at once.
      if (reconnected) void this.verify();
    });
  }

  async lookup(model: string, keys: readonly BlockKey[]): Promise<LookupResult> {
    return this.#lookup(model, keys, this.#lookupTimeoutMs);
  }

  async listPods(model: string): Promise<PodState[]> {
    return (await this.#lookup(model, [], this.#commandTimeoutMs)).pods.map((p) => p.state);
  }

  /**
   * Without `id`, the apply gets a fresh one (nextApplyId): it cannot be retried as the same apply, but
   * its loss is still detected.
   */
  async apply(pod: PodRef, ops: readonly IndexOp[], id: ApplyId = nextApplyId()): Promise<void> {
    const base = this.#base(pod.model);
    const w = this.#writtenPod(base, pod);
    const { floor, losses } = w;
    const calls = applyCalls(
      base,
      pod.podId,
      this.#ttlSeconds,
      ops,
      this.#maxKeysPerCall,
      id,
      floor,
      this.#fence,
    );
    if (calls.length === 0) return;
    this.#forgetRemoval(base, pod.podId);
    // In order, one after the other: a NOSCRIPT retry must not let a later call overtake an earlier one.
    // Past the deadline nothing more is sent; the caller's retry resends every part, and the script skips
    // those that ran.
    const reply = await this.#run('apply', this.#commandTimeoutMs * calls.length, async (expired) => {
      for (const call of calls) {
        if (expired()) break;
        const r = await SCRIPTS.apply.run(this.#conn.client, call);
        const holder = notLeaseHolderReply(r);
        if (holder !== null) return { holder };
        if (typeof r === 'number' && r < APPLY_REPLY.duplicate) return r;
      }
      return 0;
    });
    // Not a loss: the writes are not gone, this process may no longer make them. The floor stays as it is.
    if (typeof reply !== 'number')
      throw new LeaseLostError(pod.model, reply.holder, `apply to pod ${pod.podId}`);
    const lost = LOSS_REPLY[reply];
    if (lost !== undefined) {
      this.#lose(w, losses, lost);
      throw new KinferenceError(
        'KINF_ERR_REDIS',
        `apply: Redis no longer holds the writes to pod ${pod.podId} (${lost}); nothing written, the pod must be rebuilt`,
      );
    }
    const done: ApplyRecord = { writer: id.writer, seq: id.seq, part: calls.length };
    if (
      w.losses === losses &&
      (w.floor === null || w.floor.writer !== done.writer || compareApplyRecords(done, w.floor) > 0)
    )
      w.floor = done;
    this.#armVerify();
  }

  async upsertPodState(pod: PodRef, state: PodStatePatch): Promise<void> {
    const base = this.#base(pod.model);
    this.#forgetRemoval(base, pod.podId); // before sending: a check in flight must not remove it again
    const r = await this.#script(
      'upsertPodState',
      SCRIPTS.upsertPod,
      upsertPodCall(base, pod.podId, state, this.#fence),
    );
    this.#fenceCheck(r, pod.model, `upsertPodState of pod ${pod.podId}`);
  }

  async removePod(pod: PodRef): Promise<void> {
    const base = this.#base(pod.model);
    await this.#removePod(base, pod.model, pod.podId);
    const pods = this.#written.get(base);
    const w = pods?.get(pod.podId);
    if (w) {
      // Nothing of it is left to lose; a check in flight must not report it.
      w.floor = null;
      w.losses++;
      if (w.listeners.size === 0) pods!.delete(pod.podId);
    }
    this.#rememberRemoval(base, pod);
    this.#armVerify();
  }

  onWritesLost(pod: PodRef, listener: (reason: IndexLossReason) => void): () => void {
    const w = this.#writtenPod(this.#base(pod.model), pod);
    w.listeners.add(listener);
    return () => {
      w.listeners.delete(listener);
    };
  }

  /**
   * Checks that Redis still holds the last write confirmed for every pod this index wrote, and that the
   * pods it removed are still gone (runs by itself after a reconnection and every verifyIntervalMs).
   * Resolves when done; a Redis that is down or slow is skipped silently (the next run tries again).
   */
  async verify(): Promise<void> {
    if (this.#closed) return;
    if (this.#verifying) {
      this.#verifyAgain = true; // e.g. a reconnection during a check that failed: check once more after it
      return;
    }
    this.#verifying = true;
    try {
      do {
        this.#verifyAgain = false;
        try {
          for (const [base, pods] of this.#written) await this.#verifyModel(base, pods);
        } catch {
          // Down or slow: the reconnection or the next period checks again.
        }
      } while (this.#verifyAgain && !this.#closed);
    } finally {
      this.#verifying = false;
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#verifyTimer) clearInterval(this.#verifyTimer);
    this.#verifyTimer = null;
    if (this.#lossReport) {
      clearTimeout(this.#lossReport.timer);
      this.#flushLossReport();
    }
    await this.#conn.close();
  }

  async shareReservation(model: string, r: SharedReservation, ttlMs: number): Promise<void> {
    const key = reservationsKey(this.#base(model));
    await this.#run('shareReservation', this.#commandTimeoutMs, async () => {
      // One round trip; the key lives as long as reservations keep coming, and no older one outlives ttlMs.
      const res = await this.#conn.client
        .multi()
        .zadd(key, r.atMs, reservationMember(r))
        .zremrangebyscore(key, '-inf', `(${r.atMs - ttlMs}`)
        .pexpire(key, Math.max(1, 2 * ttlMs))
        .exec();
      const failed = res?.find(([err]) => err !== null)?.[0];
      if (failed) throw failed;
    });
  }

  async endReservation(model: string, r: SharedReservation): Promise<void> {
    const key = reservationsKey(this.#base(model));
    await this.#run('endReservation', this.#commandTimeoutMs, () =>
      this.#conn.client.zrem(key, reservationMember(r)),
    );
  }

  async sharedReservations(
    model: string,
    sinceMs: number,
    limit: number,
    exceptRouter?: string,
  ): Promise<SharedReservation[]> {
    const key = reservationsKey(this.#base(model));
    const flat = await this.#run('sharedReservations', this.#lookupTimeoutMs, async () => {
      const call = { keys: [key], args: [String(sinceMs), String(limit), exceptRouter ?? ''] };
      const reply = await SCRIPTS.sharedReservations.run(this.#conn.client, call);
      if (!Array.isArray(reply) || !reply.every((x) => typeof x === 'string'))
        throw new KinferenceError('KINF_ERR_INDEX_REPLY', 'shared-reservations: not a list of strings');
      return reply as string[];
    });
    const out: SharedReservation[] = [];
    // Newest first from Redis; oldest first out.
    for (let i = flat.length - 2; i >= 0; i -= 2)
      out.push(parseReservationMember(flat[i]!, Number(flat[i + 1])));
    return out;
  }

  /** Key base of a model, e.g. "kinf:{Ab3_x9Qz}:" (exposed for tests and tools that inspect keys). */
  keyBase(model: string): string {
    return this.#base(model);
  }

  async #lookup(model: string, keys: readonly BlockKey[], timeoutMs: number): Promise<LookupResult> {
    const call = lookupCall(this.#base(model), keys);
    const reply = await this.#run('lookup', timeoutMs, () => SCRIPTS.lookup.run(this.#conn.client, call));
    return parseLookupReply(model, reply);
  }

  /**
   * The record goes in 1 MB pieces to a key of this call's own, and the script only stamps and renames it:
   * no command copies more than a piece, so a large handoff never stalls the routers' lookups (lua/handoff.ts).
   * The record is taken to describe the pod as of this index's last confirmed write to it: one that landed
   * after (an apply still in flight when the record was taken, another writer) makes the script refuse it.
   */
  async saveHandoff(pod: PodRef, record: string): Promise<boolean> {
    const base = this.#base(pod.model);
    const floor = this.#written.get(base)?.get(pod.podId)?.floor ?? null;
    const expected = floor === null ? '' : formatApplyRecord(floor);
    const transfer = handoffTransferKey(base, randomBytes(8).toString('hex'));
    const bytes = Buffer.from(record, 'utf8');
    try {
      for (let at = 0; at === 0 || at < bytes.length; at += HANDOFF_CHUNK_BYTES) {
        const piece = bytes.subarray(at, at + HANDOFF_CHUNK_BYTES);
        await this.#run('saveHandoff', this.#commandTimeoutMs, (): Promise<unknown> =>
          at === 0
            ? this.#conn.client.set(transfer, piece, 'PX', HANDOFF_TRANSFER_TTL_MS)
            : this.#conn.client.append(transfer, piece),
        );
      }
      const call = handoffCall(base, pod.podId, transfer, this.#ttlSeconds * 1000, [expected], this.#fence);
      const r = await this.#script('saveHandoff', SCRIPTS.saveHandoff, call);
      this.#fenceCheck(r, pod.model, `saveHandoff of pod ${pod.podId}`);
      return r === 1;
    } catch (err) {
      await this.#dropTransfer(transfer);
      throw err;
    }
  }

  async takeHandoff(pod: PodRef): Promise<HandoffTake> {
    const base = this.#base(pod.model);
    const transfer = handoffTransferKey(base, randomBytes(8).toString('hex'));
    const call = handoffCall(base, pod.podId, transfer, HANDOFF_TRANSFER_TTL_MS, [], this.#fence);
    const r = await this.#script('takeHandoff', SCRIPTS.takeHandoff, call);
    this.#fenceCheck(r, pod.model, `takeHandoff of pod ${pod.podId}`);
    if (!Array.isArray(r)) throw new KinferenceError('KINF_ERR_REDIS', 'take-handoff: unexpected reply');
    if (r[0] === 2) return { kind: 'stale' };
    if (r[0] !== 1) return { kind: 'none' };
    try {
      const length = Number(r[1]);
      const pieces: Buffer[] = [];
      for (let at = 0; at < length; at += HANDOFF_CHUNK_BYTES) {
        const last = Math.min(length, at + HANDOFF_CHUNK_BYTES) - 1;
        pieces.push(
          await this.#run('takeHandoff', this.#commandTimeoutMs, () =>
            this.#conn.client.getrangeBuffer(transfer, at, last),
          ),
        );
      }
      const bytes = Buffer.concat(pieces);
      if (bytes.length !== length)
        throw new KinferenceError('KINF_ERR_REDIS', 'take-handoff: the record was gone before it was read');
      return { kind: 'found', record: bytes.toString('utf8') };
    } finally {
      await this.#dropTransfer(transfer);
    }
  }

  /** Best effort: the transfer key expires anyway. UNLINK frees a large value off Redis's main thread. */
  async #dropTransfer(key: string): Promise<void> {
    await this.#run('handoff cleanup', this.#commandTimeoutMs, () => this.#conn.client.unlink(key)).catch(
      () => undefined,
    );
  }

  async #removePod(base: string, model: string, podId: string): Promise<void> {
    const r = await this.#script('removePod', SCRIPTS.removePod, removePodCall(base, podId, this.#fence));
    this.#fenceCheck(r, model, `removePod of pod ${podId}`);
  }

  /** A fenced script's refusal as a LeaseLostError (KINF_ERR_LEASE_LOST): another process holds the lease. */
  #fenceCheck(reply: unknown, model: string, what: string): void {
    const holder = notLeaseHolderReply(reply);
    if (holder !== null) throw new LeaseLostError(model, holder, what);
  }

  async #script(what: string, script: RedisScript, call: ScriptCall): Promise<unknown> {
    return this.#run(what, this.#commandTimeoutMs, () => script.run(this.#conn.client, call));
  }

  async #run<T>(what: string, timeoutMs: number, work: (expired: () => boolean) => Promise<T>): Promise<T> {
    try {
      return await withDeadline(
        async (expired) => {
          await this.#conn.ready();
          return work(expired);
        },
        timeoutMs,
        what,
      );
    } catch (e) {
      throw asIndexError(e, what);
    }
  }

  // ---- lost writes -------------------------------------------------------------------------------

  #writtenPod(base: string, pod: PodRef): Written {
    let pods = this.#written.get(base);
    if (!pods) this.#written.set(base, (pods = new Map()));
    let w = pods.get(pod.podId);
    if (!w) pods.set(pod.podId, (w = { pod, floor: null, losses: 0, listeners: new Set() }));
    return w;
  }

  async #verifyModel(base: string, pods: Map<string, Written>): Promise<void> {
    const checks = [...pods.values()]
      .filter((w) => w.floor !== null)
      .map((w) => ({ w, floor: w.floor!, losses: w.losses }));
    const removed = [...(this.#removed.get(base) ?? new Map<string, string>())];
    if (checks.length === 0 && removed.length === 0) return;
    const client = this.#conn.client;
    const [records, back] = await this.#run('verify', this.#commandTimeoutMs, () =>
      Promise.all([
        checks.length > 0 ? client.hmget(appliedKey(base), ...checks.map((c) => c.w.pod.podId)) : [],
        removed.length > 0 ? client.hmget(podsKey(base), ...removed.map(([podId]) => podId)) : [],
      ]),
    );
    checks.forEach((c, i) => {
      const reason = lossReason(parseApplyRecord(records[i]), c.floor);
      if (reason !== null) this.#lose(c.w, c.losses, reason);
    });
    for (const [i, [podId, model]] of removed.entries()) {
      if (back[i] === null || back[i] === undefined) continue;
      if (this.#removed.get(base)?.get(podId) !== model) continue; // written again meanwhile
      this.#log?.warn('a removed pod is back in Redis (restored from an older snapshot): removing it again', {
        model,
        pod: podId,
      });
      await this.#removePod(base, model, podId);
    }
  }

  /** Reports a loss once: `losses` is the count seen when the check was sent. */
  #lose(w: Written, losses: number, reason: IndexLossReason): void {
    if (w.losses !== losses || this.#closed) return;
    w.losses++;
    w.floor = null;
    this.#reportLoss(w.pod, reason);
    for (const f of [...w.listeners]) f(reason);
  }

  /**
   * A restarted Redis loses every pod's writes at once: the first loss of a burst is logged at once, the
   * rest are summed up in one line a second later.
   */
  #reportLoss(pod: PodRef, reason: IndexLossReason): void {
    if (!this.#log) return;
    if (this.#lossReport) {
      this.#lossReport.pods.push(pod.podId);
      this.#lossReport.reasons[reason] = (this.#lossReport.reasons[reason] ?? 0) + 1;
      return;
    }
    this.#log.error(`Redis no longer holds the index writes (${LOSS_CAUSE[reason]}): rebuilding`, {
      model: pod.model,
      pod: pod.podId,
      reason,
    });
    const timer = setTimeout(() => this.#flushLossReport(), 1000);
    timer.unref();
    this.#lossReport = { timer, pods: [], reasons: {} };
  }

  #flushLossReport(): void {
    const r = this.#lossReport;
    this.#lossReport = null;
    if (!r || !this.#log || r.pods.length === 0) return;
    this.#log.error('Redis lost the index writes of more pods: rebuilding them too', {
      count: r.pods.length,
      pods: r.pods.slice(0, 20),
      reasons: r.reasons,
    });
  }

  #armVerify(): void {
    if (this.#verifyTimer !== null || this.#verifyIntervalMs === 0 || this.#closed) return;
    this.#verifyTimer = setInterval(() => void this.verify(), this.#verifyIntervalMs);
    this.#verifyTimer.unref();
  }

  #rememberRemoval(base: string, pod: PodRef): void {
    let pods = this.#removed.get(base);
    if (!pods) this.#removed.set(base, (pods = new Map()));
    if (!pods.has(pod.podId)) this.#removedCount++;
    pods.delete(pod.podId);
    pods.set(pod.podId, pod.model);
    if (!this.#written.has(base)) this.#written.set(base, new Map()); // verify walks #written's bases
    while (this.#removedCount > MAX_REMEMBERED_REMOVALS) {
      // drop the oldest removal of the model with the most
      let most: Map<string, string> | null = null;
      for (const m of this.#removed.values()) if (!most || m.size > most.size) most = m;
      const first = most!.keys().next();
      if (first.done) break;
      most!.delete(first.value);
      this.#removedCount--;
    }
  }

  #forgetRemoval(base: string, podId: string): void {
    const pods = this.#removed.get(base);
    if (pods?.delete(podId)) this.#removedCount--;
  }

  #base(model: string): string {
    let b = this.#bases.get(model);
    if (b === undefined) {
      if (this.#bases.size >= MAX_CACHED_MODELS) this.#bases.clear();
      b = modelKeyBase(this.#prefix, model);
      this.#bases.set(model, b);
    }
    return b;
  }
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
