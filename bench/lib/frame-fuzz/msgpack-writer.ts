/**
 * A msgpack writer that can say anything, for the frame fuzz: msgpackr normalises what it writes (-0 becomes
 * the integer 0, an integral double an int), and cannot write a header that lies about its length. vLLM
 * (msgspec) writes ints in their smallest form, floats as float64, bytes as bin, hashes as uint64 (cf).
 */
export class F64 {
  constructor(readonly v: number) {}
}
/** A raw byte run spliced into the output (a lying header, garbage). */
export class Raw {
  constructor(readonly bytes: Uint8Array) {}
}
export type Value =
  null | boolean | number | bigint | string | Uint8Array | F64 | Raw | Value[] | Map<string, Value>;

class Out {
  chunks: Buffer[] = [];
  byte(...b: number[]): void {
    this.chunks.push(Buffer.from(b));
  }
  buf(b: Uint8Array): void {
    this.chunks.push(Buffer.from(b));
  }
}

function header(o: Out, n: number, fix: number, fixMax: number, c16: number, c32: number): void {
  if (n <= fixMax) o.byte(fix | n);
  else if (n <= 0xffff) o.byte(c16, n >> 8, n & 0xff);
  else {
    const b = Buffer.alloc(5);
    b[0] = c32;
    b.writeUInt32BE(n >>> 0, 1);
    o.buf(b);
  }
}

/** An int in its smallest msgpack form, as msgspec writes Python ints (64-bit ones decode as BigInt). */
function int(o: Out, v: bigint): void {
  const b = Buffer.alloc(9);
  if (v >= 0n) {
    if (v < 0x80n) return o.byte(Number(v));
    if (v < 0x100n) return o.byte(0xcc, Number(v));
    if (v < 0x10000n) return o.byte(0xcd, Number(v >> 8n), Number(v & 0xffn));
    if (v < 0x100000000n) {
      b[0] = 0xce;
      b.writeUInt32BE(Number(v), 1);
      return o.buf(b.subarray(0, 5));
    }
    b[0] = 0xcf;
    b.writeBigUInt64BE(BigInt.asUintN(64, v), 1);
    return o.buf(b);
  }
  if (v >= -32n) return o.byte(Number(v) & 0xff);
  if (v >= -0x80n) return o.byte(0xd0, Number(v) & 0xff);
  if (v >= -0x8000n) {
    b[0] = 0xd1;
    b.writeInt16BE(Number(v), 1);
    return o.buf(b.subarray(0, 3));
  }
  if (v >= -0x80000000n) {
    b[0] = 0xd2;
    b.writeInt32BE(Number(v), 1);
    return o.buf(b.subarray(0, 5));
  }
  b[0] = 0xd3;
  b.writeBigInt64BE(BigInt.asIntN(64, v), 1);
  return o.buf(b);
}

function write(o: Out, v: Value): void {
  if (v === null) return o.byte(0xc0);
  if (v === true) return o.byte(0xc3);
  if (v === false) return o.byte(0xc2);
  if (v instanceof Raw) return o.buf(v.bytes);
  if (v instanceof F64 || (typeof v === 'number' && (!Number.isSafeInteger(v) || Object.is(v, -0)))) {
    const b = Buffer.alloc(9);
    b[0] = 0xcb;
    b.writeDoubleBE(v instanceof F64 ? v.v : v, 1);
    return o.buf(b);
  }
  if (typeof v === 'number') return write(o, BigInt(v));
  if (typeof v === 'bigint') return int(o, v);
  if (typeof v === 'string') {
    const s = Buffer.from(v, 'utf8');
    if (s.length < 32) o.byte(0xa0 | s.length);
    else header(o, s.length, 0, -1, 0xda, 0xdb);
    return o.buf(s);
  }
  if (v instanceof Uint8Array) {
    if (v.length <= 0xff) o.byte(0xc4, v.length);
    else header(o, v.length, 0, -1, 0xc5, 0xc6);
    return o.buf(v);
  }
  if (Array.isArray(v)) {
    header(o, v.length, 0x90, 15, 0xdc, 0xdd);
    for (const x of v) write(o, x);
    return;
  }
  header(o, v.size, 0x80, 15, 0xde, 0xdf);
  for (const [k, x] of v) {
    write(o, k);
    write(o, x);
  }
}

export function encode(v: Value): Buffer {
  const o = new Out();
  write(o, v);
  return Buffer.concat(o.chunks);
}

/** An array header claiming `n` elements, for a list whose items follow (or do not). */
export function arrayHeader(n: number): Raw {
  const o = new Out();
  header(o, n, 0x90, 15, 0xdc, 0xdd);
  return new Raw(Buffer.concat(o.chunks));
}
