// Fairness within a band: per-tenant virtual token counters, and the queue of requests waiting for capacity.

/**
 * A virtual token counter per tenant (VTC, Sheng et al., "Fairness in Serving Large Language Models"): the
 * work a tenant has cost the GPUs, counted as uncached prompt tokens plus output tokens, so a tenant whose
 * prompts hit the KV cache is not charged for them. Per router (one per plugin config and Kong worker),
 * bounded: the least recently charged tenants are forgotten past `maxTenants`.
 */
export class VirtualCounters {
  /** Counter and when it was last charged, per tenant, least recently charged first. */
  readonly #counts = new Map<string, { n: number; atMs: number }>();
  readonly #max: number;
  readonly #clock: () => number;

  constructor(maxTenants = 4096, clock: () => number = Date.now) {
    this.#max = maxTenants;
    this.#clock = clock;
  }

  get(tenant: string): number {
    return this.#counts.get(tenant)?.n ?? 0;
  }

  /** Charged within `ms`: the tenant is competing now, not coming back from idle. */
  active(tenant: string, ms: number): boolean {
    const c = this.#counts.get(tenant);
    return c !== undefined && this.#clock() - c.atMs < ms;
  }

  /** Charges a tenant `tokens` of work (uncached prompt + output); it becomes the most recently used. */
  charge(tenant: string, tokens: number): void {
    this.#set(tenant, this.get(tenant) + Math.max(0, tokens));
  }

  /**
   * Raises a tenant's counter to `floor`: a tenant that comes back from idle joins the competition at the
   * level of those already waiting, instead of spending credit it saved while nobody competed (VTC's lift).
   */
  lift(tenant: string, floor: number): void {
    if (this.get(tenant) < floor) this.#set(tenant, floor);
  }

  #set(tenant: string, n: number): void {
    this.#counts.delete(tenant);
    this.#counts.set(tenant, { n, atMs: this.#clock() });
    // Map iterates in insertion order: the first key is the least recently charged.
    while (this.#counts.size > this.#max) this.#counts.delete(this.#counts.keys().next().value!);
  }

  get size(): number {
    return this.#counts.size;
  }
}

interface Waiter {
  tenant: string;
  priority: number;
  seq: number;
  wake: () => void;
  timer: ReturnType<typeof setTimeout>;
}

export interface FairQueueOptions {
  /** Requests waiting at once; past it a request is not queued (the caller sheds or serves it now). */
  maxWaiters?: number;
  /** With waiters, the head re-decides at least this often (capacity also frees without a response ending). */
  pollMs?: number;
  /** A tenant not charged for this long is back from idle when it queues, and is lifted (VirtualCounters.lift). */
  idleMs?: number;
}

/**
 * Requests waiting in the gateway for capacity (a class's max_wait_ms). One at a time, in order, re-decides:
 * the highest priority first (strict between bands), then, within a band, the tenant with the smallest
 * virtual counter, then the oldest. Nothing blocks the event loop: a waiter is a promise resolved by `wake`
 * (a response ended), the poll timer or its own deadline.
 */
export class FairQueue {
  readonly #waiters = new Set<Waiter>();
  readonly #counters: VirtualCounters;
  readonly #max: number;
  readonly #pollMs: number;
  readonly #idleMs: number;
  #seq = 0;
  #poll: ReturnType<typeof setInterval> | null = null;

  constructor(counters: VirtualCounters, options: FairQueueOptions = {}) {
    this.#counters = counters;
    this.#max = options.maxWaiters ?? 1024;
    this.#pollMs = options.pollMs ?? 100;
    this.#idleMs = options.idleMs ?? 10_000;
  }

  get size(): number {
    return this.#waiters.size;
  }

  /**
   * Waits for this request's turn to re-decide, or until `waitMs` has passed; null when the queue is full
   * (do not wait). Whoever is woken and still cannot be placed waits again with what is left of its time.
   */
  wait(tenant: string, priority: number, waitMs: number): Promise<void> | null {
    if (this.#waiters.size >= this.#max || !(waitMs > 0)) return null;
    // Lift: back from idle (not charged lately, nothing waiting), it joins the band at the smallest counter
    // of the tenants already waiting in it.
    let floor = Infinity;
    const idle =
      !this.#counters.active(tenant, this.#idleMs) && ![...this.#waiters].some((w) => w.tenant === tenant);
    if (idle)
      for (const w of this.#waiters)
        if (w.priority === priority) floor = Math.min(floor, this.#counters.get(w.tenant));
    if (Number.isFinite(floor)) this.#counters.lift(tenant, floor);
    return new Promise<void>((resolve) => {
      const waiter: Waiter = {
        tenant,
        priority,
        seq: this.#seq++,
        wake: () => {
          clearTimeout(waiter.timer);
          this.#waiters.delete(waiter);
          if (this.#waiters.size === 0) this.#stopPoll();
          resolve();
        },
        timer: setTimeout(() => waiter.wake(), waitMs),
      };
      this.#waiters.add(waiter);
      this.#startPoll();
    });
  }

  /** The waiter whose turn is next (highest priority, smallest counter, oldest), or undefined. */
  #head(): Waiter | undefined {
    let best: Waiter | undefined;
    for (const w of this.#waiters) {
      if (best === undefined || this.#before(w, best)) best = w;
    }
    return best;
  }

  #before(a: Waiter, b: Waiter): boolean {
    if (a.priority !== b.priority) return a.priority > b.priority;
    const ca = this.#counters.get(a.tenant);
    const cb = this.#counters.get(b.tenant);
    if (ca !== cb) return ca < cb;
    return a.seq < b.seq;
  }

  /** Capacity may have freed: the next waiter re-decides. */
  wake(): void {
    this.#head()?.wake();
  }

  /** Who would be woken next (tests, diagnostics). */
  peek(): { tenant: string; priority: number } | null {
    const h = this.#head();
    return h ? { tenant: h.tenant, priority: h.priority } : null;
  }

  #startPoll(): void {
    if (this.#poll !== null) return;
    this.#poll = setInterval(() => this.wake(), this.#pollMs);
    this.#poll.unref?.();
  }

  #stopPoll(): void {
    if (this.#poll !== null) clearInterval(this.#poll);
    this.#poll = null;
  }

  /** Wakes every waiter now (router closing): each re-decides once more and is served or shed. */
  drain(): void {
    for (const w of [...this.#waiters]) w.wake();
  }
}
