/**
 * A MessagePack writer with explicit types, producing the exact bytes msgspec produces for vLLM's KV events:
 * integers in their smallest form (fixint, then cc/cd/ce/cf, negatives d0..d3), uint64 from a bigint,
 * Python floats always as float64 (a generic JS encoder writes an integral float such as a whole-second
 * timestamp as an integer), str in fixstr/str8/16/32, arrays/maps in fix/16/32 forms.
 */
export class MsgpackWriter {
  #buf: Buffer;
  #len = 0;

  constructor(initialBytes = 512) {
    this.#buf = Buffer.allocUnsafe(initialBytes);
  }

  #ensure(n: number): void {
    if (this.#len + n <= this.#buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.#buf.length * 2, this.#len + n));
    this.#buf.copy(next, 0, 0, this.#len);
    this.#buf = next;
  }

  #byte(b: number): void {
    this.#ensure(1);
    this.#buf[this.#len++] = b;
  }

  nil(): this {
    this.#byte(0xc0);
    return this;
  }

  bool(v: boolean): this {
    this.#byte(v ? 0xc3 : 0xc2);
    return this;
  }

  /** A safe integer, smallest encoding. */
  int(v: number): this {
    if (!Number.isSafeInteger(v)) throw new RangeError(`not a safe integer: ${v}`);
    return this.bigint(BigInt(v));
  }

  /** Any integer in [−2^63, 2^64), smallest encoding. */
  bigint(v: bigint): this {
    this.#ensure(9);
    const b = this.#buf;
    if (v >= 0n) {
      if (v < 0x80n) b[this.#len++] = Number(v);
      else if (v < 0x100n) {
        b[this.#len++] = 0xcc;
        b[this.#len++] = Number(v);
      } else if (v < 0x10000n) {
        b[this.#len++] = 0xcd;
        b.writeUInt16BE(Number(v), this.#len);
        this.#len += 2;
      } else if (v < 0x100000000n) {
        b[this.#len++] = 0xce;
        b.writeUInt32BE(Number(v), this.#len);
        this.#len += 4;
      } else if (v < 0x10000000000000000n) {
        b[this.#len++] = 0xcf;
        b.writeBigUInt64BE(v, this.#len);
        this.#len += 8;
      } else throw new RangeError(`integer too large for msgpack: ${v}`);
    } else if (v >= -32n) b[this.#len++] = Number(v) & 0xff;
    else if (v >= -0x80n) {
      b[this.#len++] = 0xd0;
      b.writeInt8(Number(v), this.#len);
      this.#len += 1;
    } else if (v >= -0x8000n) {
      b[this.#len++] = 0xd1;
      b.writeInt16BE(Number(v), this.#len);
      this.#len += 2;
    } else if (v >= -0x80000000n) {
      b[this.#len++] = 0xd2;
      b.writeInt32BE(Number(v), this.#len);
      this.#len += 4;
    } else if (v >= -0x8000000000000000n) {
      b[this.#len++] = 0xd3;
      b.writeBigInt64BE(v, this.#len);
      this.#len += 8;
    } else throw new RangeError(`integer too small for msgpack: ${v}`);
    return this;
  }

  float64(v: number): this {
    this.#ensure(9);
    this.#buf[this.#len++] = 0xcb;
    this.#buf.writeDoubleBE(v, this.#len);
    this.#len += 8;
    return this;
  }

  str(s: string): this {
    const n = Buffer.byteLength(s, 'utf8');
    this.#ensure(5 + n);
    const b = this.#buf;
    if (n < 32) b[this.#len++] = 0xa0 | n;
    else if (n < 0x100) {
      b[this.#len++] = 0xd9;
      b[this.#len++] = n;
    } else if (n < 0x10000) {
      b[this.#len++] = 0xda;
      b.writeUInt16BE(n, this.#len);
      this.#len += 2;
    } else {
      b[this.#len++] = 0xdb;
      b.writeUInt32BE(n, this.#len);
      this.#len += 4;
    }
    this.#len += b.write(s, this.#len, 'utf8');
    return this;
  }

  bin(data: Uint8Array): this {
    const n = data.length;
    this.#ensure(5 + n);
    const b = this.#buf;
    if (n < 0x100) {
      b[this.#len++] = 0xc4;
      b[this.#len++] = n;
    } else if (n < 0x10000) {
      b[this.#len++] = 0xc5;
      b.writeUInt16BE(n, this.#len);
      this.#len += 2;
    } else {
      b[this.#len++] = 0xc6;
      b.writeUInt32BE(n, this.#len);
      this.#len += 4;
    }
    b.set(data, this.#len);
    this.#len += n;
    return this;
  }

  #container(n: number, fix: number, c16: number, c32: number): this {
    this.#ensure(5);
    const b = this.#buf;
    if (n < 16) b[this.#len++] = fix | n;
    else if (n < 0x10000) {
      b[this.#len++] = c16;
      b.writeUInt16BE(n, this.#len);
      this.#len += 2;
    } else {
      b[this.#len++] = c32;
      b.writeUInt32BE(n, this.#len);
      this.#len += 4;
    }
    return this;
  }

  arrayHeader(n: number): this {
    return this.#container(n, 0x90, 0xdc, 0xdd);
  }

  mapHeader(n: number): this {
    return this.#container(n, 0x80, 0xde, 0xdf);
  }

  /** A copy of the bytes written so far. */
  toBuffer(): Buffer {
    return Buffer.from(this.#buf.subarray(0, this.#len));
  }
}
