// The collector's side of the writer lease: stands by until it holds every model's lease, then renews.
import { isKinferenceError } from '../core/errors.js';
import {
  describeLeaseHolder,
  type LeaseConflict,
  type LeaseHolder,
  type LeaseLostError,
  type WriterLease,
} from '../index/index.js';
import type { Logger } from './logger.js';

/**
 * acquiring: no answer from Redis yet; standby: another collector holds a lease we need; held: we write;
 * lost: another took it over (ours had expired), we must write nothing more; released: stopped.
 */
export type LeaseState = 'acquiring' | 'standby' | 'held' | 'lost' | 'released';

export interface LeaseView {
  state: LeaseState;
  models: readonly string[];
  /** While standing by, or after a loss: who holds which model. */
  heldBy: LeaseConflict[];
}

const holderFields = (h: LeaseHolder): Record<string, unknown> => ({ id: h.id, host: h.host, pid: h.pid });

/**
 * The collector's side of the writer lease (src/index/writer-lease.ts): stands by until every owned
 * model's lease is ours, retrying every ttl/3 quietly; then renews every ttl/3 and reports a loss once.
 * Redis being unreachable is not a loss: writes fail and are retried anyway, and the lease is renewed
 * (or taken back, if Redis came back empty) as soon as Redis answers.
 */
export class WriterLeaseKeeper {
  #state: LeaseState = 'acquiring';
  #heldBy: LeaseConflict[] = [];
  #cancelled = false;
  #wake: (() => void) | null = null;
  #timer: NodeJS.Timeout | null = null;
  #renewing: Promise<void> | null = null;
  #renewFailing = false;
  #onLost: ((lost: LeaseConflict[], refused: LeaseLostError | null) => void) | null = null;

  constructor(
    readonly lease: WriterLease,
    readonly log: Logger,
  ) {
    // A reconnection may be to a Redis that restarted empty: take the lease back before writes pile in.
    lease.onReconnect(() => {
      if (this.#state === 'held') void this.#renew();
    });
  }

  /** Standby retries and renewals: a third of the TTL, so one late or failed renewal is survived. */
  get intervalMs(): number {
    return Math.max(1, Math.floor(this.lease.ttlMs / 3));
  }

  get state(): LeaseState {
    return this.#state;
  }

  view(): LeaseView {
    return { state: this.#state, models: this.lease.models, heldBy: this.#heldBy };
  }

  /**
   * Resolves true once every lease is ours, false if `stopAcquiring()` came first. Rejects only on a
   * configuration error (KINF_ERR_CONFIG: the URL's database does not exist); Redis down is retried.
   */
  async acquire(): Promise<boolean> {
    const started = Date.now();
    let unreachable = false;
    let reported = '';
    while (!this.#cancelled) {
      try {
        const r = await this.lease.tryAcquire();
        if (r.acquired) {
          const takeover = this.#state === 'standby' ? this.#heldBy : null;
          this.#state = 'held';
          this.#heldBy = [];
          this.log.info('writer lease acquired', {
            models: this.lease.models,
            ttlMs: this.lease.ttlMs,
            holder: holderFields(this.lease.holder),
            // After a standby: the other collector released its lease (a clean stop) or let it expire.
            ...(takeover
              ? {
                  takeover: true,
                  previousHolder: holderFields(takeover[0]!.holder),
                  standbyMs: Date.now() - started,
                }
              : {}),
          });
          return true;
        }
        this.#state = 'standby';
        this.#heldBy = r.held;
        // Once, and again only if the holders change (another collector took over meanwhile).
        const who = r.held.map((c) => `${c.model}\u0000${c.holder.id}`).join('\n');
        if (who !== reported) {
          reported = who;
          const first = r.held[0]!.holder;
          const others = new Set(r.held.map((c) => c.holder.id)).size > 1;
          this.log.warn(
            `another collector, ${describeLeaseHolder(first)}, holds the writer lease of ` +
              `${r.held.map((c) => c.model).join(', ')}: standing by; taking over when its lease expires`,
            {
              models: r.held.map((c) => c.model),
              holder: holderFields(first),
              ...(others
                ? {
                    holders: r.held.map((c) => ({ model: c.model, ...holderFields(c.holder) })),
                  }
                : {}),
              expiresInMs: r.held[0]!.expiresInMs,
              leaseTtlMs: this.lease.ttlMs,
              retryEveryMs: this.intervalMs,
            },
          );
        } else
          this.log.debug('writer lease still held by another collector', {
            models: r.held.map((c) => c.model),
          });
      } catch (err) {
        if (isKinferenceError(err, 'KINF_ERR_CONFIG')) throw err;
        if (!unreachable)
          this.log.warn('cannot take the writer lease (Redis unreachable); nothing is written until then', {
            retryEveryMs: this.intervalMs,
            err,
          });
        unreachable = true;
      }
      await this.#sleep(this.intervalMs);
    }
    return false;
  }

  /**
   * Renews every ttl/3 while held; `onLost` is called once if another holder took a lease over, found by
   * a renewal (`refused` null) or by the index refusing a write (lostByFence).
   */
  hold(onLost: (lost: LeaseConflict[], refused: LeaseLostError | null) => void): void {
    if (this.#state !== 'held') return;
    this.#onLost = onLost;
    this.#timer = setInterval(() => void this.#renew(), this.intervalMs);
    this.#timer.unref();
  }

  /**
   * The index refused a write of ours (its writer fence, KINF_ERR_LEASE_LOST): another holder has the
   * lease, whether or not a renewal has seen it yet. The same loss as a renewal finding that holder; once.
   */
  lostByFence(err: LeaseLostError): void {
    if (this.#state !== 'held') return;
    this.#lose([{ model: err.model, holder: err.holder, expiresInMs: null }], err);
  }

  /** Ends a standby wait at once (a signal while standing by). */
  stopAcquiring(): void {
    this.#cancelled = true;
    this.#wake?.();
  }

  /** Stops renewing, and deletes the leases that are still ours so a standby takes over at once. */
  async release(): Promise<void> {
    this.stopAcquiring();
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    const was = this.#state;
    if (was === 'lost') return;
    this.#state = 'released';
    if (was !== 'held') return;
    await this.#renewing;
    try {
      await this.lease.release();
      this.log.info('writer lease released', { models: this.lease.models });
    } catch (err) {
      this.log.warn('could not release the writer lease; it expires by itself', {
        models: this.lease.models,
        inMs: this.lease.ttlMs,
        err,
      });
    }
  }

  #renew(): Promise<void> {
    this.#renewing ??= this.#renewOnce().finally(() => (this.#renewing = null));
    return this.#renewing;
  }

  async #renewOnce(): Promise<void> {
    try {
      const r = await this.lease.renew();
      if (this.#state !== 'held') return;
      if (!r.kept) return this.#lose(r.lost, null);
      if (this.#renewFailing) this.log.info('writer lease renewed again', { models: this.lease.models });
      this.#renewFailing = false;
      if (r.retaken.length > 0)
        this.log.warn('writer lease was gone from Redis (restarted empty, or flushed): taken back', {
          models: r.retaken,
        });
    } catch (err) {
      if (this.#state !== 'held' || this.#renewFailing) return;
      this.#renewFailing = true;
      this.log.warn(
        'could not renew the writer lease (Redis unreachable or slow); still writing, renewing once Redis answers',
        { models: this.lease.models, ttlMs: this.lease.ttlMs, err },
      );
    }
  }

  #lose(lost: LeaseConflict[], refused: LeaseLostError | null): void {
    this.#state = 'lost';
    this.#heldBy = lost;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    this.#onLost?.(lost, refused);
  }

  /** Waits `ms`, or less if stopAcquiring() wakes it. */
  #sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const t = setTimeout(done, ms);
      function done(): void {
        clearTimeout(t);
        resolve();
      }
      this.#wake = done;
    }).then(() => {
      this.#wake = null;
    });
  }
}
