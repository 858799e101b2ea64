// Concatenates index op lists, merging neighbours of the same kind and tier; counts ops.
import type { IndexOp } from '../../index/index.js';

/** Concatenates op lists in order, merging neighbours of the same kind and tier (order is preserved). */
export function mergeOps(lists: readonly (readonly IndexOp[])[]): IndexOp[] {
  const out: IndexOp[] = [];
  for (const ops of lists)
    for (const op of ops) {
      const last = out[out.length - 1];
      if (op.op === 'clear') {
        // Everything before a clear is void; keep the clear itself so the index drops older blocks.
        out.length = 0;
        out.push(op);
      } else if (last !== undefined && last.op === op.op && last.tier === op.tier) {
        for (const k of op.keys) last.keys.push(k);
      } else out.push({ op: op.op, tier: op.tier, keys: [...op.keys] });
    }
  return out;
}

export function countOps(ops: readonly IndexOp[]): number {
  let n = 0;
  for (const op of ops) n += op.op === 'clear' ? 1 : op.keys.length;
  return n;
}
