import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MODEL } from '../02-integration/emulator/emulator-fleet.js';
import { keysFor } from '../02-integration/plugin/harness.js';
import { loadTokenizer } from '../../src/tokenize/index.js';
import { postChat, startFullSystem, type FullSystem } from '../helpers/full-system.js';
import { waitFor } from '../helpers/ports.js';

/**
 * No prompt text or token sequence ever reaches Redis (docs/security.md): real traffic through the whole
 * system (emulated pods → collector → a Redis of its own ← the plugin in the real plugin server behind the
 * stand-in), prompts carrying a unique marker, then every key and every value of every type in the keyspace
 * is read and searched for the marker and for any run of 8 of the prompts' token ids, as decimal text or as
 * 16/32-bit binary in either byte order.
 */

const MARKER = 'QXZMARKER-7f3a91-okapi';
const RUN = 8;
const SYSTEM = Array.from(
  { length: 30 },
  (_, i) => `Clause ${i + 1} of ${MARKER}: every answer quotes its clause and stays under forty words.`,
).join(' ');
const turn = (q: string) => [
  { role: 'system', content: SYSTEM },
  { role: 'user', content: `${q} (${MARKER})` },
];
const BODIES: unknown[] = [
  { model: MODEL, messages: turn('Which clause covers quoting?'), max_tokens: 4 },
  { model: MODEL, messages: turn('Summarise clause 17.'), stream: true, max_tokens: 4 },
  {
    model: MODEL,
    messages: [
      ...turn('Summarise clause 3.'),
      { role: 'assistant', content: `Clause 3 ${MARKER} says little.` },
      { role: 'user', content: `And clause 4 of ${MARKER}?` },
    ],
    stream: true,
    max_tokens: 4,
  },
  { model: MODEL, messages: turn('Salted question.'), cache_salt: `salt-${MARKER}`, max_tokens: 4 },
  // Not JSON: the plugin falls back; its text must not be logged to Redis either.
  `{"model":"${MODEL}","messages":[{"role":"user","content":"${MARKER} unterminated`,
];

let sys: FullSystem;

/** Every key and value in the keyspace as raw bytes, one buffer per item (scanned with SCAN, not KEYS). */
async function dumpKeyspace(url: string): Promise<{ keys: number; types: Set<string>; items: Buffer[] }> {
  const r = new Redis(url, { lazyConnect: true });
  await r.connect();
  const items: Buffer[] = [];
  const types = new Set<string>();
  let keys = 0;
  try {
    let cursor = '0';
    do {
      const [next, batch] = await r.scanBuffer(cursor, 'COUNT', 500);
      cursor = String(next);
      for (const key of batch) {
        keys++;
        items.push(key);
        const type = await r.type(key);
        types.add(type);
        const push = (v: unknown): void => {
          if (Buffer.isBuffer(v)) items.push(v);
          else if (Array.isArray(v)) for (const x of v) push(x);
          else if (v !== null && v !== undefined) items.push(Buffer.from(String(v)));
        };
        switch (type) {
          case 'string':
            push(await r.getBuffer(key));
            break;
          case 'hash':
            push(Object.entries(await r.hgetallBuffer(key)).flat());
            break;
          case 'zset':
            push(await r.zrangeBuffer(key, '0', '-1', 'WITHSCORES'));
            break;
          case 'set':
            push(await r.smembersBuffer(key));
            break;
          case 'list':
            push(await r.lrangeBuffer(key, 0, -1));
            break;
          case 'stream':
            push(await r.xrangeBuffer(key, '-', '+'));
            break;
          default:
            throw new Error(`key of an unexpected type ${type}: ${key.toString('latin1')}`);
        }
      }
    } while (cursor !== '0');
  } finally {
    r.disconnect();
  }
  return { keys, types, items };
}

/** The byte encodings of a run of token ids a writer could have stored. */
function binaryForms(run: readonly number[]): Buffer[] {
  const out: Buffer[] = [];
  const u32le = Buffer.alloc(run.length * 4);
  const u32be = Buffer.alloc(run.length * 4);
  run.forEach((t, i) => {
    u32le.writeUInt32LE(t, i * 4);
    u32be.writeUInt32BE(t, i * 4);
  });
  out.push(u32le, u32be);
  if (run.every((t) => t < 65536)) {
    const u16le = Buffer.alloc(run.length * 2);
    const u16be = Buffer.alloc(run.length * 2);
    run.forEach((t, i) => {
      u16le.writeUInt16LE(t, i * 2);
      u16be.writeUInt16BE(t, i * 2);
    });
    out.push(u16le, u16be);
  }
  return out;
}

beforeAll(async () => {
  sys = await startFullSystem('kinf-privacy');
}, 120_000);

afterAll(async () => {
  await sys?.close();
});

describe('no prompt text or token sequence reaches Redis', () => {
  it('after streaming, non-streaming, multi-turn, salted and unparsable traffic', async () => {
    for (const b of BODIES) {
      const r = await postChat(sys.gw.url, b);
      await r.text();
    }
    // Traffic reached the index: the collector wrote the marker prompt's blocks (the keyspace is not empty
    // by accident), and every log phase (reservations, observations) has run.
    const keys = await keysFor(sys.pluginConfig, BODIES[0]);
    await waitFor('the prompt indexed', async () => {
      const res = await sys.index.lookup(MODEL, keys);
      return res.pods.some((p) => p.prefixBlocks.GPU >= Math.floor(keys.length / 2));
    });
    await sys.gw.idle();

    const dump = await dumpKeyspace(sys.redis.url);
    expect(dump.keys).toBeGreaterThan(10);
    const found = await leaks(dump.items);
    expect(found.runs).toBeGreaterThan(500);
    expect(found.leaks).toEqual([]);
  }, 120_000);

  it('the search finds a leak when there is one (a canary of each form, written and scanned)', async () => {
    const ids = (await loadTokenizer(String(sys.pluginConfig.tokenizer)).encode(SYSTEM)).slice(40, 40 + RUN);
    const r = new Redis(sys.redis.url);
    try {
      for (const [k, v] of [
        ['canary:text', `{"p":"${MARKER}"}`],
        ['canary:decimal', JSON.stringify(ids)],
        ['canary:u32', binaryForms(ids)[0]!],
      ] as const) {
        await r.hset(k, 'v', v);
        const found = await leaks((await dumpKeyspace(sys.redis.url)).items);
        expect(found.leaks.length, k).toBeGreaterThan(0);
        await r.del(k);
      }
    } finally {
      r.disconnect();
    }
  });
});

/** What of the prompts the dump holds: the marker in any form, or any run of RUN token ids. */
async function leaks(items: Buffer[]): Promise<{ runs: number; leaks: string[] }> {
  const all = Buffer.concat(items);
  const out: string[] = [];
  for (const form of [MARKER, MARKER.toLowerCase(), Buffer.from(MARKER, 'utf16le').toString('latin1')])
    if (all.includes(Buffer.from(form, 'latin1'))) out.push(`marker ${JSON.stringify(form)}`);
  if (all.includes(Buffer.from('Clause 17'))) out.push('prompt text');
  // Token runs: the prompts' texts as the pods' tokenizer encodes them.
  const tok = loadTokenizer(String(sys.pluginConfig.tokenizer));
  const texts = [SYSTEM, ...BODIES.flatMap((b) => (typeof b === 'string' ? [b] : []))];
  for (const b of BODIES)
    if (typeof b === 'object')
      for (const m of (b as { messages: { content: string }[] }).messages) texts.push(m.content);
  const numbers = `,${(all.toString('latin1').match(/\d+/g) ?? []).join(',')},`;
  let runs = 0;
  for (const text of texts) {
    const ids = await tok.encode(text);
    for (let i = 0; i + RUN <= ids.length; i++) {
      const run = ids.slice(i, i + RUN);
      runs++;
      if (numbers.includes(`,${run.join(',')},`)) out.push(`decimal run ${run.join(',')}`);
      if (binaryForms(run).some((f) => all.includes(f))) out.push(`binary run ${run.join(',')}`);
    }
  }
  return { runs, leaks: out };
}
