// The body fuzz's generator: seeded chat bodies, well-formed and every class of bad input a gateway sees.
import { Rng } from '../rng.js';

/**
 * Seeded generator of chat-completion requests for the body fuzz: well-formed bodies and every class of bad
 * input a gateway sees (issue #36). Each case is reproducible from (seed, index).
 */

export const BODY_CLASSES = [
  'valid',
  'mutated',
  'invalid_json',
  'invalid_utf8',
  'deep_nesting',
  'huge_string',
  'many_messages',
  'many_distinct_large',
  'wrong_types',
  'unknown_role',
  'tools',
  'non_object',
  'bad_query',
  'odd_headers',
] as const;
export type BodyClass = (typeof BODY_CLASSES)[number];

export interface FuzzCase {
  index: number;
  cls: BodyClass;
  /** Appended to the chat path: `?…` (possibly malformed escapes) or ''. */
  query: string;
  headers: Record<string, string>;
  body: Buffer;
}

export interface CaseOptions {
  model: string;
  /** Largest string of the huge_string class, in bytes (the long run: 10 MB). */
  maxStringBytes: number;
  /** Messages of the many_messages class (the long run: 100k). */
  manyMessages: number;
  /** Deepest nesting of the deep_nesting class. */
  maxDepth: number;
  /**
   * When set, the multi-megabyte classes (RARE_CLASSES) are never drawn at random: the runner places one every
   * `rareEvery` cases (rareClassAt), so a 10k run holds a known count of them and its wall time stays bounded.
   */
  rareEvery?: number;
}

/** The classes whose bodies are megabytes (10 MB strings, 100k messages): scheduled, run alone, measured alone. */
export const RARE_CLASSES: readonly BodyClass[] = ['huge_string', 'many_messages'];

/** The rare class case `index` (0-based among the random cases) must be, under `rareEvery`; else undefined. */
export function rareClassAt(index: number, rareEvery: number | undefined): BodyClass | undefined {
  if (!rareEvery || (index + 1) % rareEvery !== 0) return undefined;
  return RARE_CLASSES[((index + 1) / rareEvery - 1) % RARE_CLASSES.length];
}

const WORDS =
  'the a of to and in is it you that he was for on are as with his they at be this have from or one had by word but not what all were we when your can said there use an each which she do how their if will up other about out many then them these so some her would make like him into time has look two more write go see number no way could people my than first water been call who oil its now find long down day did get come made may part'.split(
    ' ',
  );
const ROLES = ['system', 'user', 'assistant', 'developer', 'tool'];
const ODD_ROLES = ['', 'robot', 'USER', 'function', 'ipython', '__proto__', 'constructor', 'user ', '\u0000'];

function text(rng: Rng, words: number): string {
  const out: string[] = new Array<string>(words);
  for (let i = 0; i < words; i++) out[i] = rng.pick(WORDS);
  return out.join(' ');
}

/** A string of about `bytes` bytes, built from a repeated random chunk (fast at 10 MB, distinct per seed). */
function bigString(rng: Rng, bytes: number): string {
  const chunk = `${text(rng, 200)} ${rng.int(1e9).toString(36)} `;
  return chunk.repeat(Math.ceil(bytes / chunk.length)).slice(0, bytes);
}

function tool(rng: Rng): unknown {
  const shapes: (() => unknown)[] = [
    () => ({
      type: 'function',
      function: {
        name: `fn_${rng.int(100)}`,
        description: text(rng, 8),
        parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
      },
    }),
    () => ({ type: 'function', function: { name: 'no_params' } }),
    () => ({ type: 'function' }),
    () => ({ type: 'function', function: null }),
    () => ({ type: 'function', function: { name: 42, parameters: 'not a schema' } }),
    () => ({ type: 'code_interpreter' }),
    () => ({ type: 'function', function: { name: 'deep', parameters: nested(rng, 50, {}) } }),
    () => 'a tool as a string',
    () => null,
    () => [1, 2, 3],
    () => ({
      type: 'function',
      function: { name: 'big', description: text(rng, 2000), parameters: { type: 'object' } },
    }),
  ];
  return rng.pick(shapes)();
}

function nested(rng: Rng, depth: number, leaf: unknown): unknown {
  let v: unknown = leaf;
  for (let i = 0; i < depth; i++) v = rng.next() < 0.5 ? [v] : { a: v };
  return v;
}

function content(rng: Rng): unknown {
  const r = rng.next();
  if (r < 0.6) return text(rng, 1 + rng.int(60));
  if (r < 0.8) return [{ type: 'text', text: text(rng, 1 + rng.int(30)) }];
  if (r < 0.9)
    return [
      { type: 'text', text: text(rng, 5) },
      { type: 'image_url', image_url: { url: 'x' } },
    ];
  return '';
}

function message(rng: Rng, i: number, n: number): Record<string, unknown> {
  const role =
    i === n - 1 ? 'user' : i === 0 && rng.next() < 0.5 ? 'system' : rng.pick(['user', 'assistant']);
  const m: Record<string, unknown> = { role, content: content(rng) };
  if (role === 'assistant' && rng.next() < 0.2)
    m.tool_calls = [
      {
        id: `c${i}`,
        type: 'function',
        function: { name: 'fn_1', arguments: JSON.stringify({ q: text(rng, 3) }) },
      },
    ];
  return m;
}

export function validBody(rng: Rng, model: string): Record<string, unknown> {
  const n = 1 + rng.int(6);
  const body: Record<string, unknown> = {
    model,
    messages: Array.from({ length: n }, (_, i) => message(rng, i, n)),
    max_tokens: 1 + rng.int(8),
  };
  if (rng.next() < 0.3) body.stream = true;
  if (rng.next() < 0.2) body.tools = [tool(rng)];
  if (rng.next() < 0.1) body.temperature = rng.next();
  return body;
}

const json = (v: unknown): Buffer => Buffer.from(JSON.stringify(v));

function mutate(rng: Rng, b: Buffer): Buffer {
  const bytes = [...b];
  const edits = 1 + rng.int(6);
  for (let e = 0; e < edits && bytes.length > 0; e++) {
    const at = rng.int(bytes.length);
    switch (rng.int(5)) {
      case 0:
        bytes[at] = rng.int(256);
        break;
      case 1:
        bytes.splice(at, 1 + rng.int(8));
        break;
      case 2:
        bytes.splice(
          at,
          0,
          ...Buffer.from(rng.pick(['{', '}', '[', ']', '"', ',', ':', '\\', 'null', '1e999', '-0'])),
        );
        break;
      case 3:
        bytes.splice(at, 0, ...bytes.slice(at, at + 1 + rng.int(32)));
        break;
      default:
        bytes.length = at; // truncated
    }
  }
  return Buffer.from(bytes);
}

function wrongTypes(rng: Rng, model: string): unknown {
  const base = validBody(rng, model);
  const bad: unknown[] = [null, 1, -1, 1.5, true, 'x', [], {}, [null], [1, 2], { role: 'user' }, 1e308];
  const field = rng.pick(['model', 'messages', 'max_tokens', 'stream', 'tools', 'tool_choice', 'n', 'stop']);
  if (rng.next() < 0.5) base[field] = rng.pick(bad);
  else {
    const msgs = base.messages as Record<string, unknown>[];
    const m = msgs[rng.int(msgs.length)]!;
    m[rng.pick(['role', 'content', 'name', 'tool_calls', 'tool_call_id'])] = rng.pick(bad);
  }
  return base;
}

/** A query string with at least one malformed percent-escape, and often other oddities beside it. */
function oddQuery(rng: Rng): string {
  const malformed = rng.pick(['a=%ff%fe&b=%00', '%', 'a=%zz&b=%4', 'stream=%E4%BD', 'a=%C0%AF%2e%2e', '%%%']);
  const other = rng.pick(['', '=&&=x&a==b', 'x=1&'.repeat(500), '+++=%2B', 'model=x&model', '&&&']);
  return rng.next() < 0.5 ? `?${malformed}&${other}` : `?${other}&${malformed}`;
}

function oddHeaders(rng: Rng): Record<string, string> {
  return rng.pick<Record<string, string>>([
    { 'content-type': 'text/plain' },
    { 'content-type': 'application/json; charset=latin1' },
    { 'content-encoding': 'gzip' },
    { 'content-encoding': 'identity' },
    { traceparent: 'garbage' },
    { traceparent: '00-0af7651916cd43dd8448eb211c8031ee-b7ad6b7169203331-01, 00-x' },
    { 'x-data-parallel-rank': '-1' },
    { 'x-forwarded-for': 'not-an-ip' },
    { accept: '*/*'.repeat(1000) },
  ]);
}

/** The `index`-th case of a run seeded with `seed`; `cls` forces a class (the CI spec covers each once). */
export function fuzzCase(seed: number, index: number, o: CaseOptions, cls?: BodyClass): FuzzCase {
  const rng = new Rng((seed * 1_000_003 + index) >>> 0);
  const c: BodyClass = cls ?? pickClass(rng, o.rareEvery !== undefined);
  let query = '';
  let headers: Record<string, string> = {};
  let body: Buffer;
  const model = o.model;
  switch (c) {
    case 'valid':
      body = json(validBody(rng, model));
      break;
    case 'mutated':
      body = mutate(rng, json(validBody(rng, model)));
      break;
    case 'invalid_json':
      body = Buffer.from(
        rng.pick([
          '',
          '{',
          '{"model":',
          'null',
          '{"messages":[}',
          '\u0000',
          '{"a":1}}',
          '[1,]',
          'NaN',
          "{'a':1}",
        ]),
      );
      break;
    case 'invalid_utf8': {
      const s = JSON.stringify(validBody(rng, model));
      const at = s.indexOf('"content":"');
      const bad = Buffer.from(
        rng.pick([[0xff, 0xfe], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe4, 0xbd], [0x80]]),
      );
      body =
        at < 0
          ? Buffer.concat([Buffer.from(s), bad])
          : Buffer.concat([Buffer.from(s.slice(0, at + 11)), bad, Buffer.from(s.slice(at + 11))]);
      break;
    }
    case 'deep_nesting': {
      const depth = 100 + rng.int(o.maxDepth);
      const open = rng.next() < 0.5 ? '['.repeat(depth) : '{"a":'.repeat(depth);
      const close = open.startsWith('[') ? ']'.repeat(depth) : '}'.repeat(depth);
      body = Buffer.from(
        rng.next() < 0.5
          ? `{"model":${JSON.stringify(model)},"messages":[{"role":"user","content":${open}1${close}}],"max_tokens":4}`
          : `{"model":${JSON.stringify(model)},"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"x":${open}1${close}}`,
      );
      break;
    }
    case 'huge_string': {
      const bytes = (1 << 20) + rng.int(Math.max(1, o.maxStringBytes - (1 << 20)));
      const b = validBody(rng, model);
      (b.messages as Record<string, unknown>[]).at(-1)!.content = bigString(rng, bytes);
      body = json(b);
      break;
    }
    case 'many_messages': {
      const n = o.manyMessages;
      const msgs = new Array<unknown>(n);
      for (let i = 0; i < n; i++)
        msgs[i] = { role: i % 2 === 0 ? 'user' : 'assistant', content: rng.pick(WORDS) };
      body = json({ model, messages: msgs, max_tokens: 2 });
      break;
    }
    case 'many_distinct_large': {
      // Distinct long prompts (64–512 KB): what a segment cache keyed by content fills with.
      const b = validBody(rng, model);
      (b.messages as Record<string, unknown>[]).at(-1)!.content = bigString(
        rng,
        (64 << 10) + rng.int(448 << 10),
      );
      body = json(b);
      break;
    }
    case 'wrong_types':
      body = json(wrongTypes(rng, model));
      break;
    case 'unknown_role': {
      const b = validBody(rng, model);
      const msgs = b.messages as Record<string, unknown>[];
      msgs[rng.int(msgs.length)]!.role = rng.pick([...ODD_ROLES, ...ROLES.map((r) => r.toUpperCase())]);
      body = json(b);
      break;
    }
    case 'tools': {
      const b = validBody(rng, model);
      b.tools = rng.next() < 0.2 ? tool(rng) : Array.from({ length: 1 + rng.int(4) }, () => tool(rng));
      if (rng.next() < 0.5) b.tool_choice = rng.pick(['auto', 'none', 'required', { type: 'function' }, 7]);
      body = json(b);
      break;
    }
    case 'non_object':
      body = json(rng.pick<unknown>([[], [1], 'chat', 42, null, true, [{ model }]]));
      break;
    case 'bad_query':
      query = oddQuery(rng);
      body = json(validBody(rng, model));
      break;
    case 'odd_headers':
      headers = oddHeaders(rng);
      body = json(validBody(rng, model));
      break;
  }
  return { index, cls: c, query, headers, body };
}

/** Class weights of a random case: cheap classes often, the multi-megabyte ones rarely. */
const WEIGHTS: [BodyClass, number][] = [
  ['valid', 20],
  ['mutated', 25],
  ['invalid_json', 5],
  ['invalid_utf8', 6],
  ['deep_nesting', 4],
  ['huge_string', 1],
  ['many_messages', 1],
  ['many_distinct_large', 3],
  ['wrong_types', 12],
  ['unknown_role', 6],
  ['tools', 10],
  ['non_object', 3],
  ['bad_query', 4],
  ['odd_headers', 4],
];
const TOTAL = WEIGHTS.reduce((s, [, w]) => s + w, 0);
const COMMON = WEIGHTS.filter(([c]) => !RARE_CLASSES.includes(c));
const COMMON_TOTAL = COMMON.reduce((s, [, w]) => s + w, 0);

function pickClass(rng: Rng, noRare: boolean): BodyClass {
  const [weights, total] = noRare ? [COMMON, COMMON_TOTAL] : [WEIGHTS, TOTAL];
  let r = rng.next() * total;
  for (const [c, w] of weights) if ((r -= w) < 0) return c;
  return 'valid';
}
