// A stand-in for vLLM's ZmqEventPublisher (PUB + replay ROUTER) that can also send forged frames.
import { Publisher, Router } from 'zeromq';

const END = Buffer.alloc(8, 0xff);

export function seqFrame(seq: number | bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt.asUintN(64, BigInt(seq)));
  return b;
}

/**
 * vLLM's ZmqEventPublisher as the fuzz needs it (vllm/distributed/kv_events.py): a bound PUB sending
 * [topic, seq8, payload] with seq from 0, and a ROUTER that answers [id, "", start8] with its buffer from
 * start, [id, "", seq8, payload]…, then [id, "", ff×8, ""], in one loop (as vLLM's replay thread does).
 * `sendRaw` puts anything on the PUB socket without numbering or buffering it: a forged frame.
 */
export class FuzzPublisher {
  readonly pub = new Publisher({ linger: 0, sendHighWaterMark: 100_000 });
  readonly router = new Router({ linger: 0 });
  readonly buffer: { seq: number; payload: Buffer }[] = [];
  seq = 0;
  replayRequests = 0;
  replayedBatches = 0;
  #loop: Promise<void> | null = null;

  constructor(
    readonly endpoint: string,
    readonly replayEndpoint: string,
    readonly topic: string,
    readonly bufferSteps: number,
  ) {}

  async bind(): Promise<void> {
    await this.pub.bind(this.endpoint);
    await this.router.bind(this.replayEndpoint);
    this.#loop = this.#serve();
  }

  async #serve(): Promise<void> {
    try {
      for await (const frames of this.router) {
        if (frames.length !== 3) continue;
        const [id, , start] = frames as [Buffer, Buffer, Buffer];
        if (start.length !== 8) continue;
        this.replayRequests++;
        const from = start.readBigUInt64BE(0);
        for (const b of this.buffer)
          if (BigInt(b.seq) >= from) {
            this.replayedBatches++;
            await this.router.send([id, Buffer.alloc(0), seqFrame(b.seq), b.payload]);
          }
        await this.router.send([id, Buffer.alloc(0), END, Buffer.alloc(0)]);
      }
    } catch {
      // closed
    }
  }

  /** The next batch of the engine: numbered, buffered for replay, sent. */
  async publish(payload: Buffer): Promise<number> {
    const seq = this.seq++;
    this.buffer.push({ seq, payload });
    if (this.buffer.length > this.bufferSteps) this.buffer.shift();
    await this.pub.send([Buffer.from(this.topic), seqFrame(seq), payload]);
    return seq;
  }

  async sendRaw(frames: Buffer[]): Promise<void> {
    await this.pub.send(frames);
  }

  async close(): Promise<void> {
    this.pub.close();
    this.router.close();
    await this.#loop;
  }
}
