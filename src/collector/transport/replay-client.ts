// Asks a vLLM replay ROUTER for the batches buffered since a sequence number (DEALER, fresh socket).
import { Dealer } from 'zeromq';
import { encodeSeq, parseReplayFrames, type SequencedPayload } from '../wire/frames.js';
import { DEFAULT_MAX_FRAME_BYTES } from './subscriber.js';

export type ReplayOutcome =
  | { kind: 'complete'; items: number }
  | { kind: 'stopped'; items: number }
  | { kind: 'timeout'; items: number }
  | { kind: 'error'; items: number; detail: string };

/**
 * How long a request may wait for its connection to the ROUTER: an endpoint that nothing listens on, or a
 * host that is down, fails within this instead of holding the stream for the whole reply timeout.
 */
export const REPLAY_CONNECT_TIMEOUT_MS = 1000;

/**
 * Asks a vLLM replay ROUTER for every buffered batch from `startSeq` (docs/collector.md#wire-format): a DEALER sends
 * ["", seq8] and reads ["", seq8, payload] until the ff×8 end marker. A fresh socket per request, so a
 * late answer to an abandoned request can never be mistaken for this one's. `onItem` returns false to stop;
 * a promise pauses reading. vLLM sends its whole buffer in one loop on a plain ROUTER, which drops what does
 * not fit under its high-water mark: so the socket's own receive queue is unbounded (receiveHighWaterMark 0)
 * and a pause never reaches the ROUTER. The reply is at most the replay buffer (buffer_steps batches), and
 * each frame at most `maxFrameBytes`: ZMQ drops the connection at a larger one before buffering it, and the
 * request ends as a timeout after the items before it.
 */
export async function requestReplay(
  endpoint: string,
  startSeq: number,
  timeoutMs: number,
  onItem: (msg: SequencedPayload) => boolean | Promise<boolean>,
  maxFrameBytes: number = DEFAULT_MAX_FRAME_BYTES,
): Promise<ReplayOutcome> {
  // immediate: the request is queued only on a completed connection, so send() waits for one, at most
  // REPLAY_CONNECT_TIMEOUT_MS.
  const connectMs = Math.min(timeoutMs, REPLAY_CONNECT_TIMEOUT_MS);
  const sock = new Dealer({
    linger: 0,
    immediate: true,
    receiveTimeout: timeoutMs,
    sendTimeout: connectMs,
    receiveHighWaterMark: 0,
    maxMessageSize: maxFrameBytes,
  });
  let items = 0;
  try {
    sock.connect(endpoint);
    try {
      await sock.send([Buffer.alloc(0), encodeSeq(startSeq)]);
    } catch (e) {
      if ((e as { code?: string }).code !== 'EAGAIN') throw e;
      return { kind: 'error', items, detail: `no connection to the replay endpoint within ${connectMs} ms` };
    }
    for (;;) {
      const frames = await sock.receive();
      const r = parseReplayFrames(frames);
      if (r.kind === 'end') return { kind: 'complete', items };
      if (r.kind === 'bad') return { kind: 'error', items, detail: r.detail };
      items++;
      const more = onItem(r.msg);
      if (!(typeof more === 'boolean' ? more : await more)) return { kind: 'stopped', items };
    }
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === 'EAGAIN') return { kind: 'timeout', items };
    return { kind: 'error', items, detail: (e as Error).message };
  } finally {
    sock.close();
  }
}
