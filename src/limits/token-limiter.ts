// TokenLimiter: admit a request against its token limits, cap and budget in one store call; settle; release.
import { randomBytes } from 'node:crypto';
import type { Policies } from '../policies/index.js';
import { limitHeaders, refusal } from './limit-headers.js';
import { BUDGET_UNITS, planRequest } from './plan.js';
import type { LimitStore } from './store.js';
import type { ActualUsage, CounterChange, LimitRequest, LimitTicket, LimitVerdict } from './types.js';

export interface TokenLimiterOptions {
  policies: Policies;
  store: LimitStore;
  /** Key prefix (the index's redis_key_prefix). */
  keyPrefix: string;
  /** The most admission may wait on the store (redis_timeout_ms); then on_redis_error decides. */
  timeoutMs: number;
  /**
   * Until the first answer: the first call also connects and loads the script, and gets at least this long
   * (as the index's first lookup does), so the first request after a deploy is counted rather than let through.
   */
  firstTimeoutMs?: number;
  clock?: () => number;
}

class Deadline extends Error {}

function describe(e: unknown): string {
  return e instanceof Error ? e.message.slice(0, 200) : String(e).slice(0, 200);
}

/**
 * Admission for one request: every counter it must fit and its tenant's slot, checked and counted in one
 * store call (one Redis script). Prompt tokens are exact at admission, so a prompt limit holds exactly; output
 * tokens are reserved (max_tokens or default_output_tokens) and settled at the end; the day's estimated cost
 * is counted against a budget the same way. The store failing or slower than `timeoutMs`: on_redis_error
 * `allow` admits uncounted (degraded says why), `deny` refuses with a 429. Never throws.
 */
export class TokenLimiter {
  readonly #o: TokenLimiterOptions;
  readonly #clock: () => number;
  #answered = false;

  constructor(o: TokenLimiterOptions) {
    this.#o = o;
    this.#clock = o.clock ?? Date.now;
  }

  get policies(): Policies {
    return this.#o.policies;
  }

  async admit(req: LimitRequest): Promise<LimitVerdict> {
    const nowMs = this.#clock();
    const id = randomBytes(8).toString('hex');
    const plan = planRequest(this.#o.policies, this.#o.keyPrefix, req, nowMs, id);
    if (plan.counters.length === 0 && plan.slot === null)
      return { admitted: true, ticket: null, headers: {}, degraded: null };
    const call = this.#o.store.admit(plan);
    let timer: NodeJS.Timeout | undefined;
    try {
      const reply = await Promise.race([
        call,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Deadline()), this.#deadlineMs());
        }),
      ]);
      this.#answered = true;
      const headers = limitHeaders(plan, reply);
      if (reply.refused >= 0) {
        const r = refusal(plan, reply);
        return {
          admitted: false,
          status: 429,
          ...r,
          headers: { ...headers, 'X-AI-RateLimit-Retry-After': String(r.retryAfterS) },
          degraded: null,
        };
      }
      const ticket: LimitTicket = {
        id,
        counters: plan.counters.map((c) => ({ key: c.key, amount: c.amount, what: c.what })),
        slot: plan.slot ? { key: plan.slot.key, member: plan.slot.member } : null,
        outputReserved: plan.outputReserved,
        done: false,
      };
      return { admitted: true, ticket, headers, degraded: null };
    } catch (e) {
      const timedOut = e instanceof Deadline;
      if (timedOut)
        // A late admission still counts in Redis: give it back when it lands (same connection, in order).
        call.then(
          (r) => (r.refused < 0 ? this.#giveBack(plan.counters, plan.slot) : undefined),
          () => undefined,
        );
      const why = timedOut
        ? `the limits store did not answer within redis_timeout_ms (${this.#deadlineMs()} ms)`
        : `the limits store failed: ${describe(e)}`;
      if (this.#o.policies.on_redis_error === 'allow')
        return {
          admitted: true,
          ticket: null,
          headers: {},
          degraded: `${why}; request admitted uncounted (on_redis_error: allow)`,
        };
      return {
        admitted: false,
        status: 429,
        retryAfterS: 1,
        code: 'limits_unavailable',
        message: 'token limits cannot be checked right now; retry shortly',
        headers: { 'X-AI-RateLimit-Retry-After': '1' },
        degraded: `${why}; request refused (on_redis_error: deny)`,
      };
    } finally {
      clearTimeout(timer);
    }
  }

  #deadlineMs(): number {
    return this.#answered ? this.#o.timeoutMs : Math.max(this.#o.timeoutMs, this.#o.firstTimeoutMs ?? 0);
  }

  async #giveBack(
    counters: { key: string; amount: number }[],
    slot: { key: string; member: string } | null,
  ): Promise<void> {
    await this.#o.store
      .adjust(
        counters.map((c) => ({ key: c.key, delta: -c.amount })),
        slot,
        this.#clock(),
      )
      .catch(() => undefined);
  }

  /**
   * The answer ended: output and total counters move from the reservation to the actual output tokens, the
   * budget from the estimate to the actual cost, and the slot is freed. A null actual keeps what was counted
   * (the reservation stands). Resolves to null, or to why the store could not be told (never throws).
   */
  async settle(ticket: LimitTicket, actual: ActualUsage): Promise<string | null> {
    if (ticket.done) return null;
    ticket.done = true;
    const changes: CounterChange[] = [];
    for (const c of ticket.counters) {
      if (c.what.kind === 'budget') {
        if (actual.cost !== null)
          changes.push({ key: c.key, delta: Math.ceil(actual.cost * BUDGET_UNITS) - c.amount });
      } else if (c.what.tokens !== 'prompt' && actual.outputTokens !== null)
        changes.push({ key: c.key, delta: Math.max(0, actual.outputTokens) - ticket.outputReserved });
    }
    return this.#adjust(
      changes.filter((c) => c.delta !== 0),
      ticket.slot,
    );
  }

  /** The request never ran (shed later, or failed upstream): everything it counted is given back. */
  async release(ticket: LimitTicket): Promise<string | null> {
    if (ticket.done) return null;
    ticket.done = true;
    return this.#adjust(
      ticket.counters.map((c) => ({ key: c.key, delta: -c.amount })),
      ticket.slot,
    );
  }

  async #adjust(changes: CounterChange[], slot: LimitTicket['slot']): Promise<string | null> {
    if (changes.length === 0 && slot === null) return null;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.#o.store.adjust(changes, slot, this.#clock()),
        new Promise<never>((_, reject) => {
          // Off the request path (log phase), so a longer bound than admission's.
          timer = setTimeout(() => reject(new Deadline()), Math.max(1000, this.#o.timeoutMs * 4));
        }),
      ]);
      return null;
    } catch (e) {
      return e instanceof Deadline
        ? 'the limits store did not answer in time'
        : `the limits store failed: ${describe(e)}`;
    } finally {
      clearTimeout(timer);
    }
  }

  close(): Promise<void> {
    return this.#o.store.close();
  }
}
