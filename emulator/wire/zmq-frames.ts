/**
 * ZMQ framing of vLLM's KV-event publisher (docs/collector.md#wire-format): live messages are
 * `[topic, seq (8 bytes big-endian), payload]`; replay replies over ROUTER are
 * `[identity, "", seq, payload]` per buffered batch, then `[identity, "", ff×8, ""]`.
 */

/** Replay end marker: (-1).to_bytes(8, "big", signed=True). */
export const END_SEQ = Buffer.alloc(8, 0xff);

export function seqFrame(seq: bigint): Buffer {
  const b = Buffer.allocUnsafe(8);
  b.writeBigUInt64BE(seq);
  return b;
}

/**
 * Reads a replay request's start sequence as vLLM does, `int.from_bytes(frame, "big")`: unsigned, any
 * length (an empty frame is 0, more than 8 bytes can exceed every sequence).
 */
export function parseSeqFrame(frame: Uint8Array): bigint {
  let v = 0n;
  for (const b of frame) v = (v << 8n) | BigInt(b);
  return v;
}
