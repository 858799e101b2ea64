/**
 * A msgpack encoder that makes the same byte choices as msgspec (docs/collector.md#wire-format), so tests
 * can publish byte-exact vLLM frames: smallest integer form (fixint, cc/cd/ce/cf, d0..d3), floats always
 * float64 (cb), fixstr then str8/16/32, arrays fixarray then dc/dd, maps in insertion order, bytes as bin.
 * JS numbers are ambiguous (1.0 is an integer), so Python floats are written with `f64(x)`.
 */
export class F64 {
  constructor(readonly value: number) {}
}
export const f64 = (v: number): F64 => new F64(v);

/** A map with a fixed key order (msgspec writes struct fields in declaration order). */
export class OrderedMap {
  constructor(readonly entries: readonly (readonly [string, MsgValue])[]) {}
}

export type MsgValue =
  null | boolean | number | bigint | string | Uint8Array | F64 | OrderedMap | readonly MsgValue[];

class Writer {
  parts: Buffer[] = [];
  byte(...b: number[]): void {
    this.parts.push(Buffer.from(b));
  }
  buf(b: Buffer): void {
    this.parts.push(b);
  }
}

function writeInt(w: Writer, v: bigint): void {
  if (v >= 0n) {
    if (v < 0x80n) return w.byte(Number(v));
    if (v < 0x100n) return w.byte(0xcc, Number(v));
    const b = Buffer.alloc(9);
    if (v < 0x10000n) return w.byte(0xcd, Number(v >> 8n), Number(v & 0xffn));
    if (v < 0x100000000n) {
      b[0] = 0xce;
      b.writeUInt32BE(Number(v), 1);
      return w.buf(b.subarray(0, 5));
    }
    if (v >= 1n << 64n) throw new RangeError(`integer ${v} does not fit uint64`);
    b[0] = 0xcf;
    b.writeBigUInt64BE(v, 1);
    return w.buf(b);
  }
  if (v >= -32n) return w.byte(Number(v) & 0xff);
  const b = Buffer.alloc(9);
  if (v >= -0x80n) return w.byte(0xd0, Number(v) & 0xff);
  if (v >= -0x8000n) {
    b[0] = 0xd1;
    b.writeInt16BE(Number(v), 1);
    return w.buf(b.subarray(0, 3));
  }
  if (v >= -0x80000000n) {
    b[0] = 0xd2;
    b.writeInt32BE(Number(v), 1);
    return w.buf(b.subarray(0, 5));
  }
  if (v < -(1n << 63n)) throw new RangeError(`integer ${v} does not fit int64`);
  b[0] = 0xd3;
  b.writeBigInt64BE(v, 1);
  w.buf(b);
}

function writeLen(
  w: Writer,
  n: number,
  fix: number,
  fixMax: number,
  c8: number | null,
  c16: number,
  c32: number,
): void {
  if (n <= fixMax) return w.byte(fix | n);
  if (c8 !== null && n < 0x100) return w.byte(c8, n);
  if (n < 0x10000) return w.byte(c16, n >> 8, n & 0xff);
  const b = Buffer.alloc(5);
  b[0] = c32;
  b.writeUInt32BE(n, 1);
  w.buf(b);
}

function write(w: Writer, v: MsgValue): void {
  if (v === null) return w.byte(0xc0);
  if (v === true) return w.byte(0xc3);
  if (v === false) return w.byte(0xc2);
  if (typeof v === 'bigint') return writeInt(w, v);
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v))
      throw new TypeError(`use f64() for the float ${v}, bigint for big integers`);
    return writeInt(w, BigInt(v));
  }
  if (v instanceof F64) {
    const b = Buffer.alloc(9);
    b[0] = 0xcb;
    b.writeDoubleBE(v.value, 1);
    return w.buf(b);
  }
  if (typeof v === 'string') {
    const s = Buffer.from(v, 'utf8');
    writeLen(w, s.length, 0xa0, 31, 0xd9, 0xda, 0xdb);
    return w.buf(s);
  }
  if (v instanceof Uint8Array) {
    writeLen(w, v.length, 0, -1, 0xc4, 0xc5, 0xc6);
    return w.buf(Buffer.from(v));
  }
  if (v instanceof OrderedMap) {
    writeLen(w, v.entries.length, 0x80, 15, null, 0xde, 0xdf);
    for (const [k, x] of v.entries) {
      write(w, k);
      write(w, x);
    }
    return;
  }
  writeLen(w, v.length, 0x90, 15, null, 0xdc, 0xdd);
  for (const x of v) write(w, x);
}

export function encodeMsgspec(v: MsgValue): Buffer {
  const w = new Writer();
  write(w, v);
  return Buffer.concat(w.parts);
}
