// vLLM's ZmqEventPublisher for one emulated engine core: KV-event batches on PUB, replay on ROUTER.
import { Publisher, Router } from 'zeromq';
import type { KvCacheEvent } from '../engine/types.js';
import { encodeKvEventBatch, type KvEventsFormat, type KvEventsHashForm } from '../wire/kv-event-batch.js';
import { END_SEQ, parseSeqFrame, seqFrame } from '../wire/zmq-frames.js';

export interface KvPublisherOptions {
  /** PUB endpoint, bound (e.g. tcp://127.0.0.1:5557 or tcp://*:5557). */
  endpoint: string;
  /** ROUTER replay endpoint, bound; omitted = no replay socket (vLLM's default). */
  replayEndpoint?: string;
  topic: string;
  format: KvEventsFormat;
  hashForm: KvEventsHashForm;
  dataParallelRank: number;
  /** Batches kept for replay (vLLM buffer_steps, 10 000). */
  bufferSteps: number;
  /** PUB high-water mark (vLLM hwm, 100 000). */
  hwm: number;
}

interface Buffered {
  seq: bigint;
  payload: Buffer;
}

/** zeromq allows one send in flight per socket: sends go through a chain. */
class SendChain {
  #tail: Promise<void> = Promise.resolve();
  push(send: () => Promise<void>): void {
    this.#tail = this.#tail.then(send).catch(() => undefined);
  }
  async idle(): Promise<void> {
    await this.#tail;
  }
}

async function bindWithRetry(sock: Publisher | Router, endpoint: string): Promise<void> {
  // A just-closed socket can hold its TCP port for a moment (restart): retry briefly.
  for (let attempt = 0; ; attempt++) {
    try {
      await sock.bind(endpoint);
      return;
    } catch (e) {
      if (attempt >= 50 || !String((e as Error).message).includes('in use')) throw e;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

/**
 * vLLM's ZmqEventPublisher for one engine core: one batch per step on PUB as
 * `[topic, seq (8B BE), msgpack]`, sequence numbers from 0 per start, a bounded replay buffer served over
 * ROUTER (`[id, "", start_seq]` → `[id, "", seq, payload]`… then `[id, "", ff×8, ""]`).
 */
export class KvEventPublisher {
  readonly #o: KvPublisherOptions;
  #pub: Publisher | null = null;
  #router: Router | null = null;
  #seq = 0n;
  #buffer: Buffered[] = [];
  #bufferStart = 0;
  #pubChain = new SendChain();
  #routerChain = new SendChain();
  #replayLoop: Promise<void> | null = null;
  #topic: Buffer;

  constructor(o: KvPublisherOptions) {
    this.#o = o;
    this.#topic = Buffer.from(o.topic, 'utf8');
  }

  get nextSeq(): bigint {
    return this.#seq;
  }

  async start(): Promise<void> {
    const pub = new Publisher({ sendHighWaterMark: this.#o.hwm, linger: 0 });
    await bindWithRetry(pub, this.#o.endpoint);
    this.#pub = pub;
    if (this.#o.replayEndpoint !== undefined) {
      const router = new Router({ linger: 0 });
      await bindWithRetry(router, this.#o.replayEndpoint);
      this.#router = router;
      this.#replayLoop = this.#serveReplay(router);
    }
  }

  /** Encodes, numbers, buffers and sends one batch (no-op for an empty batch, as vLLM publishes none). */
  publish(events: readonly KvCacheEvent[], tsSeconds: number): void {
    if (events.length === 0 || this.#pub === null) return;
    const payload = encodeKvEventBatch(tsSeconds, events, {
      format: this.#o.format,
      hashForm: this.#o.hashForm,
      dataParallelRank: this.#o.dataParallelRank,
    });
    const seq = this.#seq++;
    this.#remember({ seq, payload });
    const pub = this.#pub;
    const frames = [this.#topic, seqFrame(seq), payload];
    this.#pubChain.push(() => pub.send(frames));
  }

  #remember(b: Buffered): void {
    if (this.#o.bufferSteps <= 0) return;
    this.#buffer.push(b);
    // Amortised O(1) deque: drop the head lazily, compact now and then.
    if (this.#buffer.length - this.#bufferStart > this.#o.bufferSteps) this.#bufferStart++;
    if (this.#bufferStart > 1024 && this.#bufferStart * 2 > this.#buffer.length) {
      this.#buffer = this.#buffer.slice(this.#bufferStart);
      this.#bufferStart = 0;
    }
  }

  async #serveReplay(router: Router): Promise<void> {
    for (;;) {
      let msg: Buffer[];
      try {
        msg = await router.receive();
      } catch {
        return; // socket closed
      }
      // vLLM ignores (and logs) any request that is not 3 frames; it reads neither the delimiter nor the
      // start frame's length (int.from_bytes of whatever is there).
      if (msg.length !== 3) continue;
      const start = parseSeqFrame(msg[2] as Buffer);
      const identity = msg[0] as Buffer;
      const snapshot = this.#buffer.slice(this.#bufferStart).filter((b) => b.seq >= start);
      for (const b of snapshot)
        this.#routerChain.push(() => router.send([identity, '', seqFrame(b.seq), b.payload]));
      this.#routerChain.push(() => router.send([identity, '', END_SEQ, '']));
    }
  }

  /** Closes both sockets; a later start() begins again at seq 0 with an empty buffer (a restarted engine). */
  async close(): Promise<void> {
    await Promise.race([this.#pubChain.idle(), new Promise((r) => setTimeout(r, 200))]);
    this.#pub?.close();
    this.#router?.close();
    await this.#replayLoop;
    this.#pub = null;
    this.#router = null;
    this.#replayLoop = null;
    this.#seq = 0n;
    this.#buffer = [];
    this.#bufferStart = 0;
    this.#pubChain = new SendChain();
    this.#routerChain = new SendChain();
  }
}
