// A shared reservation as a member string of the model's reservations sorted set, and back.
import { KinferenceError } from '../core/errors.js';
import type { SharedReservation } from './kv-index.js';

/**
 * A shared reservation as a member of the model's reservations ZSET (its score is atMs):
 * "router|id|uncachedTokens|promptTokens|podId". The pod id comes last, so any text it holds survives.
 */
export function reservationMember(r: SharedReservation): string {
  return `${r.router}|${r.id}|${r.uncachedTokens}|${r.promptTokens}|${r.podId}`;
}

export function parseReservationMember(member: string, atMs: number): SharedReservation {
  const parts = member.split('|');
  const [router, id, uncached, prompt] = parts;
  const nums = [Number(id), Number(uncached), Number(prompt), atMs];
  if (parts.length < 5 || !router || !nums.every(Number.isFinite))
    throw new KinferenceError(
      'KINF_ERR_INDEX_REPLY',
      `malformed shared reservation "${member.slice(0, 80)}"`,
    );
  return {
    router,
    id: nums[0]!,
    uncachedTokens: nums[1]!,
    promptTokens: nums[2]!,
    podId: parts.slice(4).join('|'),
    atMs,
  };
}
