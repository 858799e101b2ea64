// Hands kong-pdk's listener whole msgpack messages: its own receive re-joins every chunk (quadratic in size).
import net from 'node:net';

/**
 * kong-pdk 0.6.0's listener (listener.js, getStreamDecoder) receives a message of n bytes in 64 KiB socket
 * chunks and, on every chunk, `Buffer.concat`s all of them again and tries a full msgpack decode, which fails
 * with "Insufficient data" until the last one: O(n²/64 KiB) copying on the plugin server's one event loop.
 * A 3.5 MB body (100,000 short messages) spent ~600 ms there before any budget of ours applied, and every
 * other request on the Kong node waited (bench:fuzz:bodies, docs/security.md). Here each accepted socket of
 * the listener gets a framer: chunks are kept until a whole top-level msgpack value has arrived (its length
 * is read from the headers: a body is one str/bin whose length is in its header, skipped, not read), then
 * handed on as one chunk, copied once. The listener's decoder then decodes each message at its first try.
 *
 * Hand-written because it must sit below kong-pdk's own decoder (which gives no length before a full decode)
 * and only needs the lengths of msgpack's headers, not a decoder.
 */

/** Sized types: [header bytes, length bytes in the header, what the length counts, fixed payload bytes]. */
const SIZED: Record<number, [number, number, 'bytes' | 'items' | 'pairs', number]> = {
  0xc4: [2, 1, 'bytes', 0],
  0xc5: [3, 2, 'bytes', 0],
  0xc6: [5, 4, 'bytes', 0],
  0xc7: [3, 1, 'bytes', 0], // ext8: length, then a type byte in the header
  0xc8: [4, 2, 'bytes', 0],
  0xc9: [6, 4, 'bytes', 0],
  0xca: [1, 0, 'bytes', 4],
  0xcb: [1, 0, 'bytes', 8],
  0xcc: [1, 0, 'bytes', 1],
  0xcd: [1, 0, 'bytes', 2],
  0xce: [1, 0, 'bytes', 4],
  0xcf: [1, 0, 'bytes', 8],
  0xd0: [1, 0, 'bytes', 1],
  0xd1: [1, 0, 'bytes', 2],
  0xd2: [1, 0, 'bytes', 4],
  0xd3: [1, 0, 'bytes', 8],
  0xd4: [1, 0, 'bytes', 2],
  0xd5: [1, 0, 'bytes', 3],
  0xd6: [1, 0, 'bytes', 5],
  0xd7: [1, 0, 'bytes', 9],
  0xd8: [1, 0, 'bytes', 17],
  0xd9: [2, 1, 'bytes', 0],
  0xda: [3, 2, 'bytes', 0],
  0xdb: [5, 4, 'bytes', 0],
  0xdc: [3, 2, 'items', 0],
  0xdd: [5, 4, 'items', 0],
  0xde: [3, 2, 'pairs', 0],
  0xdf: [5, 4, 'pairs', 0],
};

/** Where the first whole msgpack value in `b` ends; `{ need }`: at least that many bytes first; null: invalid. */
export function msgpackValueEnd(b: Uint8Array): number | { need: number } | null {
  let pos = 0;
  let pending = 1; // values still to skip: containers add their elements
  const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  while (pending > 0) {
    if (pos >= b.length) return { need: pos + 1 };
    const t = b[pos]!;
    pending--;
    let head = 1; // header bytes
    let body = 0; // payload bytes after the header
    let items = 0; // elements a container adds
    if (t <= 0x7f || t >= 0xe0 || t === 0xc0 || t === 0xc2 || t === 0xc3) head = 1;
    else if (t <= 0x8f) items = 2 * (t & 0x0f);
    else if (t <= 0x9f) items = t & 0x0f;
    else if (t <= 0xbf) body = t & 0x1f;
    else {
      const s = SIZED[t];
      if (!s) return null; // 0xc1: never used
      const [h, lenBytes, counts, fixed] = s;
      head = h;
      if (pos + head > b.length) return { need: pos + head };
      const n =
        lenBytes === 0
          ? 0
          : lenBytes === 1
            ? b[pos + 1]!
            : lenBytes === 2
              ? view.getUint16(pos + 1)
              : view.getUint32(pos + 1);
      if (counts === 'bytes') body = fixed + n;
      else items = counts === 'items' ? n : 2 * n;
    }
    if (pos + head + body > b.length) return { need: pos + head + body };
    pos += head + body;
    pending += items;
  }
  return pos;
}

/** Collects one connection's chunks into whole messages (each handed on once, as one Buffer). */
export class MessageFramer {
  #chunks: Buffer[] = [];
  #bytes = 0;
  #need = 0;
  /** Set after bytes that are no msgpack: from then on chunks pass as they come (the listener reports it). */
  passthrough = false;

  push(chunk: Buffer): Buffer[] {
    if (this.passthrough) return [chunk];
    this.#chunks.push(chunk);
    this.#bytes += chunk.length;
    if (this.#bytes < this.#need) return [];
    let data = this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks, this.#bytes);
    this.#chunks = [];
    this.#bytes = 0;
    this.#need = 0;
    const out: Buffer[] = [];
    while (data.length > 0) {
      const end = msgpackValueEnd(data);
      if (end === null) {
        this.passthrough = true;
        out.push(data);
        return out;
      }
      if (typeof end !== 'number') {
        this.#chunks = [data];
        this.#bytes = data.length;
        this.#need = end.need;
        return out;
      }
      out.push(end === data.length ? data : data.subarray(0, end));
      data = data.subarray(end);
    }
    return out;
  }
}

const marker = Symbol.for('kinference.rpcFraming');

/** Gives `socket` a framer: its 'data' events carry whole messages from now on. */
export function frameSocket(socket: net.Socket): void {
  const framer = new MessageFramer();
  const emit = socket.emit.bind(socket) as (event: string | symbol, ...args: unknown[]) => boolean;
  socket.emit = function (event: string | symbol, ...args: unknown[]): boolean {
    if (event !== 'data' || !Buffer.isBuffer(args[0])) return emit(event, ...args);
    for (const message of framer.push(args[0])) emit('data', message);
    return true;
  } as typeof socket.emit;
}

/**
 * Wraps net.createServer so that each connection of a Unix-socket server (kong-pdk's listener; this process
 * serves no other) is framed before its first byte. Must run before the listener serves, so that every
 * connection starts at a message boundary: kong-js-pluginserver loads the plugins (synchronously) before it
 * calls `Listener.serve()`, so the plugin module installs it when it is loaded there (isPluginServerProcess).
 * KINFERENCE_KEEP_PDK_RECEIVE=1 turns it off.
 */
export function installRpcFraming(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.KINFERENCE_KEEP_PDK_RECEIVE === '1') return false;
  const g = globalThis as Record<symbol, unknown>;
  if (g[marker]) return true;
  const createServer = net.createServer;
  net.createServer = function (this: unknown, ...args: unknown[]): net.Server {
    const i = args.findIndex((a) => typeof a === 'function');
    if (i >= 0) {
      const onConnection = args[i] as (socket: net.Socket) => void;
      args[i] = function (this: net.Server, socket: net.Socket): void {
        if (typeof this.address() === 'string') frameSocket(socket);
        onConnection.call(this, socket);
      };
    }
    return (createServer as (...a: unknown[]) => net.Server).apply(this, args);
  } as typeof net.createServer;
  g[marker] = true;
  return true;
}

/** True when this module was loaded by kong-js-pluginserver (not a test, a tool or the stand-in). */
export function isPluginServerProcess(): boolean {
  return /kong-js-pluginserver$/.test(process.argv[1] ?? '');
}
