/**
 * Where a received batch sequence number stands relative to the last one we ingested. vLLM's publisher
 * counts from 0 per process, +1 per batch (research/vllm.md §2): a jump forward means batches were dropped
 * (HWM), a step back means a new publisher process, i.e. the engine restarted.
 */
export type SeqVerdict =
  | { kind: 'first' }
  | { kind: 'next' }
  | { kind: 'duplicate' }
  | { kind: 'gap'; expected: number; missing: number }
  | { kind: 'restart' };

/**
 * @param last the last ingested sequence, null if none since the stream (re)started
 * @param maybeDuplicate the batch arrived while a replay was running, so an old number is a replay overlap
 */
export function classifySeq(last: number | null, seq: number, maybeDuplicate = false): SeqVerdict {
  if (last === null) return { kind: 'first' };
  if (seq === last + 1) return { kind: 'next' };
  if (seq <= last) return maybeDuplicate ? { kind: 'duplicate' } : { kind: 'restart' };
  return { kind: 'gap', expected: last + 1, missing: seq - last - 1 };
}
