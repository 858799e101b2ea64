// Detects lost index writes (a flushed or failed-over Redis) by checking confirmed apply records.
import { compareApplyRecords, lossReason, parseApplyRecord, type ApplyRecord } from './apply-id.js';
import type { IndexLossReason, PodRef } from './kv-index.js';
import type { RedisIndexContext } from './redis-index-context.js';
import { appliedKey, podsKey } from './redis-keys.js';

/** A pod this index has written: the last apply record it saw confirmed, and who wants to hear of a loss. */
export interface Written {
  pod: PodRef;
  /** null until an apply is confirmed, and again after a loss (the rebuild starts from scratch). */
  floor: ApplyRecord | null;
  /** Bumped on each loss: a check sent before it must not report the same loss again. */
  losses: number;
  listeners: Set<(reason: IndexLossReason) => void>;
}

/** What each loss reason usually means, for the log line. */
const LOSS_CAUSE: Record<IndexLossReason, string> = {
  missing: 'restarted empty, or flushed',
  rolled_back: 'restarted from an older snapshot',
  overwritten:
    'another writer wrote the pod: one without the writer lease (an unfenced index), a collector that lost its lease and wrote while the lease key was missing, or a snapshot from before this process',
};

/** Removed pods remembered, to remove again if an older snapshot brings them back. */
const MAX_REMEMBERED_REMOVALS = 1024;

/**
 * The Redis writer's memory of what it wrote, to detect its loss: for every pod it wrote, the last apply
 * record Redis confirmed, checked against Redis (one HMGET per model) after every reconnection and every
 * verifyIntervalMs; a loss is told to the pod's listeners once. Pods it removed are checked too, and
 * removed again (`removeAgain`) if an older snapshot brings them back.
 */
export class WriteLossWatch {
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

  constructor(
    private readonly ctx: RedisIndexContext,
    private readonly removeAgain: (base: string, model: string, podId: string) => Promise<void>,
  ) {}

  pod(base: string, pod: PodRef): Written {
    let pods = this.#written.get(base);
    if (!pods) this.#written.set(base, (pods = new Map()));
    let w = pods.get(pod.podId);
    if (!w) pods.set(pod.podId, (w = { pod, floor: null, losses: 0, listeners: new Set() }));
    return w;
  }

  /** The last apply record Redis confirmed for the pod, or null (none yet, or lost since). */
  confirmed(base: string, podId: string): ApplyRecord | null {
    return this.#written.get(base)?.get(podId)?.floor ?? null;
  }

  /** An apply Redis confirmed; `losses` is the count seen when it was sent (a loss meanwhile wins). */
  confirm(w: Written, losses: number, done: ApplyRecord): void {
    if (
      w.losses === losses &&
      (w.floor === null || w.floor.writer !== done.writer || compareApplyRecords(done, w.floor) > 0)
    )
      w.floor = done;
    this.arm();
  }

  /** Reports a loss once: `losses` is the count seen when the check was sent. */
  lose(w: Written, losses: number, reason: IndexLossReason): void {
    if (w.losses !== losses || this.#closed) return;
    w.losses++;
    w.floor = null;
    this.#reportLoss(w.pod, reason);
    for (const f of [...w.listeners]) f(reason);
  }

  /** The pod was removed: nothing of it is left to lose, and it must stay gone. */
  removed(base: string, pod: PodRef): void {
    const pods = this.#written.get(base);
    const w = pods?.get(pod.podId);
    if (w) {
      // A check in flight must not report it.
      w.floor = null;
      w.losses++;
      if (w.listeners.size === 0) pods!.delete(pod.podId);
    }
    this.#rememberRemoval(base, pod);
    this.arm();
  }

  /** The pod is written again: not a removal to repeat. */
  forgetRemoval(base: string, podId: string): void {
    const pods = this.#removed.get(base);
    if (pods?.delete(podId)) this.#removedCount--;
  }

  /**
   * Checks that Redis still holds the last write confirmed for every pod this index wrote, and that the
   * pods it removed are still gone. Resolves when done; a Redis that is down or slow is skipped silently
   * (the next run tries again).
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

  /** Starts the periodic check (once anything was written). */
  arm(): void {
    const ms = this.ctx.settings.verifyIntervalMs;
    if (this.#verifyTimer !== null || ms === 0 || this.#closed) return;
    this.#verifyTimer = setInterval(() => void this.verify(), ms);
    this.#verifyTimer.unref();
  }

  close(): void {
    this.#closed = true;
    if (this.#verifyTimer) clearInterval(this.#verifyTimer);
    this.#verifyTimer = null;
    if (this.#lossReport) {
      clearTimeout(this.#lossReport.timer);
      this.#flushLossReport();
    }
  }

  async #verifyModel(base: string, pods: Map<string, Written>): Promise<void> {
    const checks = [...pods.values()]
      .filter((w) => w.floor !== null)
      .map((w) => ({ w, floor: w.floor!, losses: w.losses }));
    const removed = [...(this.#removed.get(base) ?? new Map<string, string>())];
    if (checks.length === 0 && removed.length === 0) return;
    const client = this.ctx.conn.client;
    const [records, back] = await this.ctx.run('verify', this.ctx.settings.commandTimeoutMs, () =>
      Promise.all([
        checks.length > 0 ? client.hmget(appliedKey(base), ...checks.map((c) => c.w.pod.podId)) : [],
        removed.length > 0 ? client.hmget(podsKey(base), ...removed.map(([podId]) => podId)) : [],
      ]),
    );
    checks.forEach((c, i) => {
      const reason = lossReason(parseApplyRecord(records[i]), c.floor);
      if (reason !== null) this.lose(c.w, c.losses, reason);
    });
    for (const [i, [podId, model]] of removed.entries()) {
      if (back[i] === null || back[i] === undefined) continue;
      if (this.#removed.get(base)?.get(podId) !== model) continue; // written again meanwhile
      this.ctx.settings.log?.warn(
        'a removed pod is back in Redis (restored from an older snapshot): removing it again',
        { model, pod: podId },
      );
      await this.removeAgain(base, model, podId);
    }
  }

  /**
   * A restarted Redis loses every pod's writes at once: the first loss of a burst is logged at once, the
   * rest are summed up in one line a second later.
   */
  #reportLoss(pod: PodRef, reason: IndexLossReason): void {
    const log = this.ctx.settings.log;
    if (!log) return;
    if (this.#lossReport) {
      this.#lossReport.pods.push(pod.podId);
      this.#lossReport.reasons[reason] = (this.#lossReport.reasons[reason] ?? 0) + 1;
      return;
    }
    log.error(`Redis no longer holds the index writes (${LOSS_CAUSE[reason]}): rebuilding`, {
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
    const log = this.ctx.settings.log;
    this.#lossReport = null;
    if (!r || !log || r.pods.length === 0) return;
    log.error('Redis lost the index writes of more pods: rebuilding them too', {
      count: r.pods.length,
      pods: r.pods.slice(0, 20),
      reasons: r.reasons,
    });
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
}
