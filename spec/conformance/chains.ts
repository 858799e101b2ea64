import { blockKeys, keySeed } from '../../src/core/block-keys.js';
import type { BlockKey } from '../../src/core/types.js';

/** Deterministic token ids for a named text: tests get real chained block keys, not made-up strings. */
function tokens(name: string, count: number): number[] {
  let h = 2166136261;
  for (const ch of name) h = Math.imul(h ^ ch.charCodeAt(0), 16777619);
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    h = Math.imul(h ^ (h >>> 15), 2246822519) ^ i;
    out.push((h >>> 0) % 150_000);
  }
  return out;
}

const BLOCK = 16;

/** `n` chained keys of a text called `name`, starting a new chain (or continuing after `parent`). */
export function chain(
  name: string,
  n: number,
  parent: BlockKey = keySeed({ model: 'test-model' }),
): BlockKey[] {
  return blockKeys(tokens(name, n * BLOCK), BLOCK, parent);
}

/** A chain that shares `shared` with `base`'s first blocks, then diverges (a shared system prompt). */
export function branch(base: readonly BlockKey[], shared: number, name: string, n: number): BlockKey[] {
  const head = base.slice(0, shared);
  const parent = shared > 0 ? head[shared - 1]! : keySeed({ model: 'test-model' });
  return [...head, ...chain(name, n, parent)];
}
