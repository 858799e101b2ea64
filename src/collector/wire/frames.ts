/**
 * ZMQ framing of vLLM's publisher (docs/collector.md#wire-format):
 *   live:   [topic, seq (8-byte big-endian uint), payload]
 *   replay: DEALER sends ["", start_seq]; receives ["", seq, payload]…, then ["", ff×8, ""].
 */

export interface SequencedPayload {
  seq: number;
  payload: Uint8Array;
}

export type FrameResult = { ok: true; msg: SequencedPayload } | { ok: false; detail: string };

/** END_SEQ = (-1).to_bytes(8, "big", signed=True). */
export const END_SEQ = Buffer.alloc(8, 0xff);

function readSeq(frame: Uint8Array): number | null {
  if (frame.length !== 8) return null;
  const v = Buffer.from(frame.buffer, frame.byteOffset, 8).readBigUInt64BE(0);
  // itertools.count() starts at 0; nothing publishes 2^53 batches, so a larger value is garbage.
  return v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : null;
}

export function encodeSeq(seq: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(seq));
  return b;
}

export function parseLiveFrames(frames: readonly Uint8Array[]): FrameResult {
  if (frames.length !== 3) return { ok: false, detail: `expected 3 frames, got ${frames.length}` };
  const seq = readSeq(frames[1]!);
  if (seq === null) return { ok: false, detail: 'sequence frame is not an 8-byte counter' };
  return { ok: true, msg: { seq, payload: frames[2]! } };
}

export type ReplayFrame =
  { kind: 'item'; msg: SequencedPayload } | { kind: 'end' } | { kind: 'bad'; detail: string };

/**
 * One reply as a DEALER sees it: the ROUTER's identity frame is gone, the empty delimiter stays.
 * vLLM sends ["", seq, payload]; llm-d-inference-sim adds a topic frame: ["", topic, seq, payload].
 */
export function parseReplayFrames(frames: readonly Uint8Array[]): ReplayFrame {
  if ((frames.length !== 3 && frames.length !== 4) || frames[0]!.length !== 0)
    return { kind: 'bad', detail: `unexpected replay reply of ${frames.length} frames` };
  const seqFrame = frames[frames.length - 2]!;
  if (seqFrame.length === 8 && Buffer.from(seqFrame.buffer, seqFrame.byteOffset, 8).equals(END_SEQ))
    return { kind: 'end' };
  const seq = readSeq(seqFrame);
  if (seq === null) return { kind: 'bad', detail: 'replay sequence frame is not an 8-byte counter' };
  return { kind: 'item', msg: { seq, payload: frames[frames.length - 1]! } };
}
