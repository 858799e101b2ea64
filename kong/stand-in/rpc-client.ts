// Kong's side of the MessagePack-RPC to a plugin server over its unix socket.
import { connect, type Socket } from 'node:net';
import { decode, encode } from '@msgpack/msgpack';

/**
 * Kong's side of the MessagePack-RPC to a plugin server (kong.md §2.1, mp_rpc.lua Rpc:call): request
 * `[0, msgid, method, [params]]`, reply `[1, msgid, error|nil, result]`. Exactly one request per write and one
 * request in flight per connection (the JS listener dies on two messages in one chunk); connections are
 * pooled like cosocket keepalive; msgid is a per-client counter and every reply is checked against it.
 */

export class RpcError extends Error {
  /** `remote`: the server answered with an error string; `transport`: socket failure, timeout, bad reply. */
  readonly kind: 'remote' | 'transport';
  constructor(kind: 'remote' | 'transport', message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'RpcError';
    this.kind = kind;
  }
}

export interface RpcClientOptions {
  /** Per-call timeout; OpenResty's cosocket default is 60 s. */
  timeoutMs?: number;
  maxIdle?: number;
}

interface Conn {
  socket: Socket;
  chunks: Buffer[];
  size: number;
  waiter: ((err: Error | null) => void) | null;
}

export class MsgpackRpcClient {
  readonly socketPath: string;
  #msgId = 0;
  #idle: Conn[] = [];
  #all = new Set<Conn>();
  #timeoutMs: number;
  #maxIdle: number;
  #closed = false;

  constructor(socketPath: string, opts: RpcClientOptions = {}) {
    this.socketPath = socketPath;
    this.#timeoutMs = opts.timeoutMs ?? 60_000;
    this.#maxIdle = opts.maxIdle ?? 16;
  }

  #connect(): Promise<Conn> {
    return new Promise((resolve, reject) => {
      const socket = connect(this.socketPath);
      const conn: Conn = { socket, chunks: [], size: 0, waiter: null };
      const onConnectError = (e: Error): void =>
        reject(new RpcError('transport', `connect: ${e.message}`, { cause: e }));
      socket.once('error', onConnectError);
      socket.once('connect', () => {
        socket.off('error', onConnectError);
        socket.setNoDelay(true);
        socket.on('data', (chunk: Buffer) => {
          conn.chunks.push(chunk);
          conn.size += chunk.length;
          conn.waiter?.(null);
        });
        const fail = (e: Error): void => {
          this.#drop(conn);
          conn.waiter?.(e);
        };
        socket.on('error', fail);
        socket.on('close', () => fail(new Error('connection closed by the plugin server')));
        this.#all.add(conn);
        resolve(conn);
      });
    });
  }

  #drop(conn: Conn): void {
    this.#all.delete(conn);
    const i = this.#idle.indexOf(conn);
    if (i >= 0) this.#idle.splice(i, 1);
    conn.socket.destroy();
  }

  /** Reads exactly one message: accumulate until the decoder stops asking for more (Kong's mp_unpacker). */
  #readOne(conn: Conn): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        conn.waiter = null;
        this.#drop(conn);
        reject(new RpcError('transport', `timeout after ${this.#timeoutMs} ms`));
      }, this.#timeoutMs);
      const attempt = (err: Error | null): void => {
        if (err) {
          clearTimeout(timer);
          conn.waiter = null;
          reject(new RpcError('transport', err.message, { cause: err }));
          return;
        }
        if (conn.size === 0) return;
        const buf = conn.chunks.length === 1 ? conn.chunks[0]! : Buffer.concat(conn.chunks, conn.size);
        conn.chunks = [buf];
        let msg: unknown;
        try {
          msg = decode(buf);
        } catch (e) {
          if (e instanceof RangeError && /insufficient data/i.test(e.message)) return; // wait for more
          clearTimeout(timer);
          conn.waiter = null;
          this.#drop(conn);
          reject(new RpcError('transport', `undecodable reply: ${String(e)}`, { cause: e }));
          return;
        }
        clearTimeout(timer);
        conn.waiter = null;
        conn.chunks = [];
        conn.size = 0;
        resolve(msg);
      };
      conn.waiter = attempt;
      attempt(null);
    });
  }

  /** Calls `plugin.<Method>` with `params` (Kong always wraps them in an array) and returns the result. */
  async call(method: string, ...params: unknown[]): Promise<unknown> {
    if (this.#closed) throw new RpcError('transport', 'client closed');
    const id = ++this.#msgId;
    const conn = this.#idle.pop() ?? (await this.#connect());
    const frame = encode([0, id, method, params]);
    const reply = this.#readOne(conn);
    conn.socket.write(frame);
    const msg = await reply;
    if (!Array.isArray(msg) || msg.length < 3 || msg[0] !== 1) {
      this.#drop(conn);
      throw new RpcError('transport', `RPC response expected, got ${JSON.stringify(msg)?.slice(0, 200)}`);
    }
    if (msg[1] !== id) {
      this.#drop(conn);
      throw new RpcError('transport', `unexpected RPC response id ${String(msg[1])} (expected ${id})`);
    }
    if (this.#idle.length < this.#maxIdle && !this.#closed) this.#idle.push(conn);
    else this.#drop(conn);
    const err: unknown = msg[2];
    if (err !== null && err !== undefined) throw new RpcError('remote', String(err));
    return msg[3];
  }

  /** Drops pooled connections (after the server was respawned they point at a dead socket). */
  reset(): void {
    for (const c of [...this.#idle]) this.#drop(c);
  }

  close(): void {
    this.#closed = true;
    for (const c of [...this.#all]) this.#drop(c);
  }
}
