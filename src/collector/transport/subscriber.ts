import { Subscriber } from 'zeromq';

export interface SubscriberOptions {
  endpoint: string;
  topic: string;
  receiveHighWaterMark: number;
  onMessage(frames: Buffer[]): void;
  onConnection(event: 'connect' | 'disconnect', address: string): void;
  onError(err: unknown): void;
}

/**
 * ZMQ SUB to one vLLM publisher. vLLM's PUB binds (`tcp://*:5557`), so we connect; libzmq reconnects on
 * its own. Messages are handed over synchronously, in order, one receive loop per socket.
 */
export class EventSubscriber {
  readonly #sock: Subscriber;
  #loop: Promise<void> | null = null;
  #closed = false;

  constructor(readonly opts: SubscriberOptions) {
    this.#sock = new Subscriber({ linger: 0, receiveHighWaterMark: opts.receiveHighWaterMark });
  }

  start(): void {
    const events = this.#sock.events;
    events.on('connect', (e) => this.opts.onConnection('connect', e.address));
    events.on('disconnect', (e) => this.opts.onConnection('disconnect', e.address));
    this.#sock.connect(this.opts.endpoint);
    this.#sock.subscribe(this.opts.topic);
    this.#loop = this.#run();
  }

  async #run(): Promise<void> {
    try {
      for await (const frames of this.#sock) this.opts.onMessage(frames);
    } catch (e) {
      if (!this.#closed) this.opts.onError(e);
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#sock.close();
    await this.#loop;
  }
}
