// A shared reservation as a member string of the model's reservations sorted set, and back.
import { KinferenceError } from '../core/errors.js';
import type { SharedReservation } from './kv-index.js';

/**
 * Marks the optional class field, before the pod id: "@c:priority:objectiveMs:expectedTtftMs:ownMs", and ":1"
 * after it when the class is squeezed (a node that reads only four numbers takes that member's pod as unknown).
 */
const CLASS_MARK = '@c:';

/**
 * A shared reservation as a member of the model's reservations ZSET (its score is atMs):
 * "router|id|uncachedTokens|promptTokens|[@c:priority:objective:expected:own|]podId". The pod id comes last,
 * so any text it holds survives. A node without the class field reads a classed member's pod id as unknown
 * (that reservation is not counted there): mixed versions degrade to not sharing, never to a wrong pod.
 */
export function reservationMember(r: SharedReservation): string {
  const c = r.cls;
  // A class-less reservation whose pod id itself starts with the mark says so ("@c:-"), so it parses back.
  const cls = c
    ? `${CLASS_MARK}${c.priority}:${Math.round(c.objectiveMs)}:${Math.round(c.expectedTtftMs)}:${Math.round(c.ownMs)}${c.squeezed ? ':1' : ''}|`
    : r.podId.startsWith(CLASS_MARK)
      ? `${CLASS_MARK}-|`
      : '';
  return `${r.router}|${r.id}|${r.uncachedTokens}|${r.promptTokens}|${cls}${r.podId}`;
}

/** The class field: a class, 'none' (the explicit "@c:-"), or null (not a class field: part of the pod id). */
function parseClass(field: string): SharedReservation['cls'] | 'none' | null {
  if (field === `${CLASS_MARK}-`) return 'none';
  if (!field.startsWith(CLASS_MARK)) return null;
  const n = field.slice(CLASS_MARK.length).split(':').map(Number);
  if ((n.length !== 4 && !(n.length === 5 && n[4] === 1)) || !n.every(Number.isFinite)) return null;
  const cls = { priority: n[0]!, objectiveMs: n[1]!, expectedTtftMs: n[2]!, ownMs: n[3]! };
  return n.length === 5 ? { ...cls, squeezed: true } : cls;
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
  const field = parts.length > 5 ? parseClass(parts[4]!) : null;
  const cls = field === 'none' ? null : field;
  return {
    router,
    id: nums[0]!,
    uncachedTokens: nums[1]!,
    promptTokens: nums[2]!,
    podId: parts.slice(field ? 5 : 4).join('|'),
    atMs,
    ...(cls ? { cls } : {}),
  };
}
