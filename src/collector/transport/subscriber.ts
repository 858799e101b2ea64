// ZMQ SUB to one vLLM KV-event publisher, with heartbeats; messages handed over in order.
import { Subscriber } from 'zeromq';
import { KinferenceError } from '../../core/errors.js';

/** ZMTP PING every this often; the connection is dropped when nothing arrives within the timeout. */
export const HEARTBEAT_INTERVAL_MS = 2000;
export const HEARTBEAT_TIMEOUT_MS = 6000;
/** Largest frame (one message part) accepted by default: vLLM batches are far smaller (docs/security.md). */
export const DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024;
/**
 * After a disconnection, libzmq announces its reconnection at once (`connect:retry`, a few ms). It never does
 * after a protocol error (a frame over maxMessageSize, a ZMTP violation): it gives the endpoint up. Silence
 * this long after a disconnection means that, and the subscriber connects again itself.
 */
export const GIVEN_UP_AFTER_MS = 1000;

export interface SubscriberOptions {
  endpoint: string;
  topic: string;
  receiveHighWaterMark: number;
  /** Largest frame accepted (ZMQ maxMessageSize); default DEFAULT_MAX_FRAME_BYTES. */
  maxFrameBytes?: number;
  onMessage(frames: Buffer[]): void;
  onConnection(event: 'connect' | 'disconnect', address: string): void;
  onError(err: unknown): void;
  /**
   * libzmq dropped the connection for a protocol error, most likely a frame over maxFrameBytes (refused
   * before it was buffered), and gave the endpoint up; the subscriber connects again right after this.
   */
  onRefused?(address: string): void;
}

/**
 * ZMQ SUB to one vLLM publisher. vLLM's PUB binds (`tcp://*:5557`), so we connect; libzmq reconnects on
 * its own. Messages are handed over synchronously, in order, one receive loop per socket. A frame over
 * maxFrameBytes is refused by libzmq before it is buffered; libzmq then drops the connection and never
 * reconnects (a protocol error), so the subscriber notices the silence after the disconnection, reports it
 * (onRefused) and connects again: what was lost meanwhile is a sequence gap, replayed as any other.
 */
export class EventSubscriber {
  readonly #sock: Subscriber;
  #loop: Promise<void> | null = null;
  #closed = false;
  #givenUp: NodeJS.Timeout | null = null;

  constructor(readonly opts: SubscriberOptions) {
    this.#sock = new Subscriber({
      linger: 0,
      receiveHighWaterMark: opts.receiveHighWaterMark,
      maxMessageSize: opts.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES,
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
    events.on('connect', (e) => {
      this.#reconnecting();
      this.opts.onConnection('connect', e.address);
    });
    events.on('connect:retry', () => this.#reconnecting());
    events.on('connect:delay', () => this.#reconnecting());
    events.on('disconnect', (e) => {
      this.opts.onConnection('disconnect', e.address);
      this.#reconnecting();
      this.#givenUp = setTimeout(() => this.#reconnect(e.address), GIVEN_UP_AFTER_MS).unref();
    });
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

  /** libzmq is reconnecting on its own (or connected): not a refused frame. */
  #reconnecting(): void {
    if (this.#givenUp) clearTimeout(this.#givenUp);
    this.#givenUp = null;
  }

  /** libzmq gave the endpoint up after a protocol error: count it, and connect again. */
  #reconnect(address: string): void {
    this.#givenUp = null;
    if (this.#closed) return;
    this.opts.onRefused?.(address);
    try {
      // The endpoint's session is gone already; disconnect() only forgets the endpoint, if libzmq still has it.
      this.#sock.disconnect(this.opts.endpoint);
    } catch {
      // not connected under that name any more
    }
    try {
      this.#sock.connect(this.opts.endpoint);
    } catch (e) {
      this.opts.onError(e);
    }
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
    this.#reconnecting();
    this.#sock.close();
    await this.#loop;
  }
}
