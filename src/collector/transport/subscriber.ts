// ZMQ SUB to one vLLM KV-event publisher, with heartbeats; messages handed over in order.
import { Subscriber } from 'zeromq';
import { KinferenceError } from '../../core/errors.js';

/** ZMTP PING every this often; the connection is dropped when nothing arrives within the timeout. */
export const HEARTBEAT_INTERVAL_MS = 2000;
export const HEARTBEAT_TIMEOUT_MS = 6000;

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
    this.#sock = new Subscriber({
      linger: 0,
      receiveHighWaterMark: opts.receiveHighWaterMark,
      // ZMTP heartbeats (libzmq ≥ 4.2 answers them by itself): a peer gone silent, its host dead with no
      // FIN, is disconnected (and reconnected to later) instead of looking connected forever.
      heartbeatInterval: HEARTBEAT_INTERVAL_MS,
      heartbeatTimeout: HEARTBEAT_TIMEOUT_MS,
    });
  }

  /**
   * Connects and starts receiving. An endpoint ZMQ refuses (`tcp://host:notaport`, `tcp://*:5557`) is reported
   * through onError as a KINF_ERR_CONFIG naming it, and the stream stays silent: it must not throw out of
   * the collector (the fleet schema rejects such endpoints up front; discovery builds only valid ones).
   */
  start(): void {
    const events = this.#sock.events;
    events.on('connect', (e) => this.opts.onConnection('connect', e.address));
    events.on('disconnect', (e) => this.opts.onConnection('disconnect', e.address));
    try {
      this.#sock.connect(this.opts.endpoint);
    } catch (e) {
      this.opts.onError(
        new KinferenceError(
          'KINF_ERR_CONFIG',
          `kv events endpoint "${this.opts.endpoint}" rejected by ZMQ (${(e as Error).message}): expected tcp://host:port, ipc://path or inproc://name`,
          { cause: e },
        ),
      );
      return;
    }
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
