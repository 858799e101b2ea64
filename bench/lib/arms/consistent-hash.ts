// The consistent-hash arm: Kong's consistent hashing on the prompt's prefix, a ring of virtual nodes.
import { crc32 } from 'node:zlib';
import type { Arm } from './types.js';

/**
 * Consistent hashing on the prompt's prefix, as a Kong AI Gateway user would set it up (consistent-hashing
 * on a header carrying a hash of the system prompt / first message): a ring of virtual nodes per pod (Kong
 * spreads each target over `slots`), crc32 of the first message picks the owner. Same prefix, same pod,
 * whatever the load.
 */
export function consistentHashArm(podIds: readonly string[], virtualNodes = 160): Arm {
  const ring: { point: number; podId: string }[] = [];
  for (const id of podIds)
    for (let v = 0; v < virtualNodes; v++) ring.push({ point: crc32(`${id}#${v}`), podId: id });
  ring.sort((a, b) => a.point - b.point || (a.podId < b.podId ? -1 : 1));
  const owner = (h: number): string => {
    let lo = 0;
    let hi = ring.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (ring[mid]!.point < h) lo = mid + 1;
      else hi = mid;
    }
    return ring[lo % ring.length]!.podId;
  };
  return {
    name: 'consistent-hash',
    choose: (req, pods) => {
      const id = owner(crc32(req.firstMessageText));
      // A pod missing from the live list (never here) would fall back to the first live one.
      return { podId: pods.some((p) => p.id === id) ? id : pods[0]!.id };
    },
  };
}
