// The limiter's request, plan, ticket and verdict: what admission counts and what a 429 says.
import type { LimitWindow, TokenKind } from '../policies/index.js';
import type { Tenant } from '../policies/index.js';

/** What admission knows of a request: its tenant, model and exact prompt tokens (no prompt text). */
export interface LimitRequest {
  tenant: Tenant;
  /** The base model (rate-limit matches on model); null when not known. */
  model: string | null;
  /** Exact: the router's tokenizer counted them. */
  promptTokens: number;
  /** The body's max_tokens (or max_completion_tokens); null: policies.default_output_tokens is reserved. */
  maxTokens: number | null;
  /**
   * The request's estimated cost in policies.currency, computed by the caller (src/usage prices it); null
   * when no price applies, and then a daily budget cannot count it.
   */
  estimatedCost: number | null;
}

/** What one counter holds: tokens of a kind in a window, or the day's cost for a budget. */
export type CounterWhat =
  { kind: 'tokens'; tokens: TokenKind; window: LimitWindow; policy: number } | { kind: 'budget' };

/** One counter a request must fit: value + amount ≤ limit, all counters or none. */
export interface PlannedCounter {
  key: string;
  limit: number;
  amount: number;
  /** PEXPIRE of the key, from now: to the window's end plus a margin. */
  ttlMs: number;
  resetMs: number;
  what: CounterWhat;
}

/** A tenant's concurrency cap: a sorted set of tickets scored by when each expires. */
export interface PlannedSlot {
  key: string;
  max: number;
  member: string;
  /** The score: the slot frees itself then, if nobody releases it (a Kong node that died). */
  expiresMs: number;
  ttlMs: number;
}

export interface LimitPlan {
  nowMs: number;
  counters: PlannedCounter[];
  slot: PlannedSlot | null;
  /** Output tokens reserved at admission (max_tokens or the default), settled at the end. */
  outputReserved: number;
}

/** The store's answer: which check refused (-1 none; counters.length = the slot), and the values seen. */
export interface AdmitReply {
  refused: number;
  /** Each counter's value after counting (admitted) or as found (refused). */
  values: number[];
  /** Requests in flight for the slot's tenant, this one included when admitted. */
  inFlight: number;
}

/** A change to one counter (settle: actual − reserved; release: − amount). */
export interface CounterChange {
  key: string;
  delta: number;
}

/** What an admitted request holds until settle or release. */
export interface LimitTicket {
  id: string;
  counters: { key: string; amount: number; what: CounterWhat }[];
  slot: { key: string; member: string } | null;
  outputReserved: number;
  /** Set once settled or released: a second call does nothing. */
  done: boolean;
}

/** What the log phase knows at the end; null: not known (the reservation then stands as counted). */
export interface ActualUsage {
  outputTokens: number | null;
  cost: number | null;
}

export type LimitVerdict =
  | {
      admitted: true;
      /** null when nothing was counted (no policy matched, or Redis failed and on_redis_error is allow). */
      ticket: LimitTicket | null;
      /** X-AI-RateLimit-* for the client (limit-headers.ts). */
      headers: Record<string, string>;
      /** Why nothing could be counted (Redis down or slow): the request was let through (fail open). */
      degraded: string | null;
    }
  | {
      admitted: false;
      status: 429;
      retryAfterS: number;
      /** OpenAI-style error code: tokens_per_minute_exceeded, concurrency_cap, daily_budget, limits_unavailable… */
      code: string;
      /** For the client: what was over, by how much; never prompt text. */
      message: string;
      headers: Record<string, string>;
      degraded: string | null;
    };
