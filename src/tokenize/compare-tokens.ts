// compareTokens: where our token ids and a pod's first differ (verify-tokenizer's pure core).
/** Where our token ids and a pod's first differ (pure; the core of `kinference verify-tokenizer`'s report). */
export interface TokenComparison {
  match: boolean;
  /** Index of the first differing token, or the shorter length when one is a prefix of the other. */
  first_mismatch: number | null;
  ours_count: number;
  theirs_count: number;
}

export function compareTokens(ours: readonly number[], theirs: readonly number[]): TokenComparison {
  const n = Math.min(ours.length, theirs.length);
  let i = 0;
  while (i < n && ours[i] === theirs[i]) i++;
  const match = i === ours.length && i === theirs.length;
  return { match, first_mismatch: match ? null : i, ours_count: ours.length, theirs_count: theirs.length };
}
