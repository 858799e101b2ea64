// Every Redis key of the limiter: one hash tag per tenant (or per shared policy), never prompt text.
import { createHash } from 'node:crypto';

/**
 * Layout, for prefix `kinf`:
 *
 *   kinf:{l:<T>}:w:<P>:<kind>:<win>:<start>  STRING tokens counted in one window (prompt, output or total);
 *                                            PX TTL = to the window's end + KEY_MARGIN_MS
 *   kinf:{l:<T>}:d:<day>                     STRING the day's estimated cost, in millionths of the currency;
 *                                            PX TTL = to UTC midnight + KEY_MARGIN_MS
 *   kinf:{l:<T>}:c                           ZSET   requests in flight (member = ticket id, score = expiry ms)
 *
 * T = 48 bits of SHA-1 of the tenant's name (per: tenant) or of the policy's match (per: all): one tenant's
 * counters, cap and budget share one hash tag, so one slot of a Redis Cluster and one script call. P = 48
 * bits of SHA-1 of the policy's match and scope: an edited match starts new counters, a reordered list does not.
 */
export function tag(s: string): string {
  return createHash('sha1').update(s, 'utf8').digest().subarray(0, 6).toString('base64url');
}

/** The key base of one scope: the tenant's name, or a shared policy's signature. */
export function scopeBase(prefix: string, scope: string): string {
  return `${prefix}:{l:${tag(scope)}}:`;
}

export function windowKey(base: string, policy: string, kind: string, win: string, startMs: number): string {
  return `${base}w:${tag(policy)}:${kind}:${win}:${Math.floor(startMs / 1000)}`;
}

export function budgetKey(base: string, dayStartMs: number): string {
  return `${base}d:${new Date(dayStartMs).toISOString().slice(0, 10).replaceAll('-', '')}`;
}

export function concurrencyKey(base: string): string {
  return `${base}c`;
}

/** The hash tag of a key: what Redis Cluster hashes (the part between the first { and the next }). */
export function hashTagOf(key: string): string {
  const open = key.indexOf('{');
  const close = key.indexOf('}', open + 1);
  return open >= 0 && close > open + 1 ? key.slice(open + 1, close) : key;
}
