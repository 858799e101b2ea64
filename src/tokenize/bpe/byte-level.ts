// Byte-level BPE's input side: GPT-2's printable byte alphabet and a string's UTF-8 bytes.
/**
 * GPT-2's byte-level alphabet (HF ByteLevel pre-tokenizer): every byte is shown as a printable character;
 * bytes that are printable Latin-1 stand for themselves, the others map to U+0100 onwards, in byte order.
 */
export function byteLevelAlphabet(): string[] {
  const chars: string[] = new Array(256);
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    chars[b] = String.fromCharCode(printable ? b : 256 + extra++);
  }
  return chars;
}

/**
 * UTF-8 bytes of a string into `out` (cleared first). Lone surrogates become U+FFFD, as they do when a JS
 * string crosses into the native (Rust) tokenizers.
 */
export function utf8Bytes(s: string, out: number[]): number[] {
  out.length = 0;
  for (let i = 0; i < s.length; i++) {
    let c = s.charCodeAt(i);
    if (c < 0x80) {
      out.push(c);
      continue;
    }
    if (c >= 0xd800 && c <= 0xdfff) {
      const d = s.charCodeAt(i + 1);
      if (c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        i++;
        out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 0x3f), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f));
        continue;
      }
      c = 0xfffd;
    }
    if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 0x3f));
    else out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f));
  }
  return out;
}
