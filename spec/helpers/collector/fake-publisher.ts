// FakeVllmPublisher: a real ZMQ PUB + replay ROUTER sending vLLM-shaped KV-event frames, for tests.
import { Publisher, Router } from 'zeromq';
import { freePort } from '../ports.js';
import { encodeBatch, liveFrames, seqFrame, type BatchOptions, type EventSpec } from './vllm-frames.js';

const END = Buffer.alloc(8, 0xff);

/** Binds `sock` on a free loopback port, picking another when the first is taken before the bind (EADDRINUSE). */
async function bindFree(sock: { bind(endpoint: string): Promise<void> }, host: string): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    const endpoint = `tcp://${host}:${await freePort()}`;
    try {
      await sock.bind(endpoint);
      return endpoint;
    } catch (e) {
      if (attempt >= 5 || !/in use/i.test(String(e))) throw e;
    }
  }
}

/**
 * A stand-in for vLLM's ZmqEventPublisher (docs/collector.md#wire-format): a bound PUB socket sending
 * [topic, seq8, payload] with seq from 0 per "process", and a ROUTER replaying its buffer of encoded
 * batches: request [id, "", start8] → [id, "", seq8, payload]… then [id, "", ff×8, ""].
 */
export class FakeVllmPublisher {
  pub = new Publisher({ linger: 0 });
  readonly router: Router | null;
  readonly buffer: { seq: number; payload: Buffer }[] = [];
  seq = 0;
  endpoint = '';
  replayEndpoint = '';
  replayRequests = 0;
  /** Awaited before each replay is answered: lets a test act while the collector waits on its replay. */
  beforeReplay: (() => Promise<void>) | null = null;
  #loop: Promise<void> | null = null;

  constructor(
    readonly batch: Omit<BatchOptions, 'ts'>,
    readonly opts: {
      topic?: string;
      replay?: boolean;
      bufferSteps?: number;
      host?: string;
      /**
       * The ROUTER's send high-water mark per peer (ZMQ's default 1000, as vLLM's). Past it a ROUTER drops
       * what a slow reader has not taken; 0 never drops (a spec whose subject is not that).
       */
      replaySendHighWaterMark?: number;
    } = {},
  ) {
    this.router =
      opts.replay === false
        ? null
        : new Router({
            linger: 0,
            ...(opts.replaySendHighWaterMark !== undefined
              ? { sendHighWaterMark: opts.replaySendHighWaterMark }
              : {}),
          });
  }

  /** Binds on free ports; a port another process took between the pick and the bind is picked again. */
  async bind(): Promise<this> {
    const host = this.opts.host ?? '127.0.0.1';
    this.endpoint = await bindFree(this.pub, host);
    if (this.router) {
      this.replayEndpoint = await bindFree(this.router, host);
      this.#loop = this.#serveReplay(this.router);
    }
    return this;
  }

  /** Binds at given endpoints (e.g. port + rank, as a data-parallel vLLM does). */
  async bindAt(endpoint: string, replayEndpoint: string): Promise<this> {
    this.endpoint = endpoint;
    await this.pub.bind(endpoint);
    if (this.router) {
      this.replayEndpoint = replayEndpoint;
      await this.router.bind(replayEndpoint);
      this.#loop = this.#serveReplay(this.router);
    }
    return this;
  }

  async #serveReplay(router: Router): Promise<void> {
    try {
      for await (const frames of router) {
        if (frames.length !== 3) continue; // vLLM logs and ignores other shapes
        const [id, , start] = frames as [Buffer, Buffer, Buffer];
        this.replayRequests++;
        await this.beforeReplay?.();
        const from = Number(start.readBigUInt64BE(0));
        for (const b of this.buffer)
          if (b.seq >= from) await router.send([id, Buffer.alloc(0), seqFrame(b.seq), b.payload]);
        await router.send([id, Buffer.alloc(0), END, Buffer.alloc(0)]);
      }
    } catch {
      // closed
    }
  }

  /** Encodes, buffers for replay and (unless `drop`) sends one batch; returns its sequence number. */
  async publish(events: EventSpec[], o: { drop?: boolean; ts?: number } = {}): Promise<number> {
    const payload = encodeBatch(events, { ...this.batch, ts: o.ts ?? Date.now() / 1000 });
    return this.publishPayload(payload, o);
  }

  async publishPayload(payload: Buffer, o: { drop?: boolean } = {}): Promise<number> {
    const seq = this.seq++;
    this.buffer.push({ seq, payload });
    if (this.buffer.length > (this.opts.bufferSteps ?? 10_000)) this.buffer.shift();
    if (!o.drop) await this.pub.send(liveFrames(this.opts.topic ?? '', seq, payload));
    return seq;
  }

  async sendRaw(frames: Buffer[]): Promise<void> {
    await this.pub.send(frames);
  }

  /**
   * A network blip: the PUB socket closes (subscribers lose their connection) and a new one binds the same
   * endpoint; the engine, its sequence and its replay buffer carry on. `whileDown` runs in between.
   */
  async reconnect(whileDown: () => Promise<void> = async () => {}): Promise<void> {
    this.pub.close();
    await whileDown();
    this.pub = new Publisher({ linger: 0 });
    // The old socket's port can linger for a moment after close: retry briefly.
    for (let i = 0; ; i++)
      try {
        await this.pub.bind(this.endpoint);
        return;
      } catch (e) {
        if (i >= 50) throw e;
        await new Promise((r) => setTimeout(r, 20));
      }
  }

  /** A new engine process: sequence back to 0, empty replay buffer. */
  restart(): void {
    this.seq = 0;
    this.buffer.length = 0;
  }

  async close(): Promise<void> {
    this.pub.close();
    this.router?.close();
    await this.#loop;
  }
}
