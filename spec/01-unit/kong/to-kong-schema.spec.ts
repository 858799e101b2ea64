import fc from 'fast-check';
import { Type, type TObject, type TSchema } from '@sinclair/typebox';
import { describe, expect, it } from 'vitest';
import { PluginConfigSchema } from '../../../src/config/plugin-config.js';
import { regexToLua, toKongSchema, type KongField } from '../../../src/config/to-kong-schema.js';
import { validateConfig } from '../../../src/config/validate.js';
import { luaMatches } from '../../../kong/stand-in/lua-pattern.js';
import { processPluginConfig } from '../../../kong/stand-in/process-config.js';

const fields = toKongSchema(PluginConfigSchema);
const byName = Object.fromEntries(fields.map((e) => Object.entries(e)[0]!)) as Record<string, KongField>;

/** What Kong's match / match_any / len_* accept, given a converted pattern. */
function kongAccepts(m: ReturnType<typeof regexToLua>, v: string): boolean {
  if (m.len_min !== undefined && v.length < m.len_min) return false;
  if (m.len_max !== undefined && v.length > m.len_max) return false;
  if (m.match !== undefined && !luaMatches(m.match, v)) return false;
  if (m.match_any && !m.match_any.patterns.some((p) => luaMatches(p, v))) return false;
  return true;
}

function patternsIn(s: TSchema, out: string[] = []): string[] {
  const o = s as Record<string, unknown>;
  if (typeof o.pattern === 'string') out.push(o.pattern);
  for (const k of ['properties', 'patternProperties'])
    if (o[k] && typeof o[k] === 'object')
      for (const v of Object.values(o[k] as object)) patternsIn(v as TSchema, out);
  if (o.items) patternsIn(o.items as TSchema, out);
  for (const k of ['anyOf', 'allOf', 'oneOf'])
    if (Array.isArray(o[k])) for (const v of o[k] as TSchema[]) patternsIn(v, out);
  return out;
}

describe('toKongSchema (TypeBox config → Kong schema)', () => {
  it('keeps declaration order, one single-key object per field', () => {
    expect(fields.map((e) => Object.keys(e)[0])).toEqual(Object.keys(PluginConfigSchema.properties));
    for (const e of fields) expect(Object.keys(e)).toHaveLength(1);
  });

  it('maps literal unions to one_of, bounds to between, defaults and secrets', () => {
    expect(byName.index).toMatchObject({
      type: 'string',
      one_of: ['redis', 'memory'],
      default: 'redis',
      required: true,
    });
    expect(byName.fallback?.one_of).toEqual(['least-loaded', 'kong-default']);
    expect(byName.redis_timeout_ms).toMatchObject({ type: 'integer', between: [1, 10000], default: 25 });
    expect(byName.trace_sample_ratio).toMatchObject({ type: 'number', between: [0, 1], default: 1 });
    expect(byName.expose_headers).toMatchObject({ type: 'boolean', default: false });
    // A pattern with words (x-expected) is a match_any whose err says them: Kong's own message for the field.
    expect(byName.redis_url).toMatchObject({
      referenceable: true,
      encrypted: true,
      match_any: {
        patterns: ['^rediss?://'],
        err: 'expected a Redis URL: redis://[user:password@]host:port/db, or rediss://… for TLS',
      },
    });
    expect(byName.redis_url).not.toHaveProperty('match');
    expect(byName.tokenizer?.match_any?.err).toMatch(/^expected a tokenizer spec: tiktoken:<encoding>/);
    expect(byName.chat_template?.match_any?.err).toMatch(/^expected a chat template: chatml, harmony/);
    expect(byName.service_name).toMatchObject({ len_min: 1 });
  });

  it('optional fields are not required and have no default; maps keep their element rules', () => {
    expect(byName.otlp_endpoint).toMatchObject({ type: 'string', required: false });
    expect(byName.otlp_endpoint).not.toHaveProperty('default');
    expect(byName.model_pods).toMatchObject({
      type: 'map',
      required: false,
      keys: { type: 'string' },
      values: {
        type: 'array',
        elements: {
          type: 'string',
          match_any: {
            patterns: ['^[^: \t\n\v\f\r]+:[0-9][0-9]?[0-9]?[0-9]?[0-9]?$'],
            err: 'expected host:port (e.g. 10.0.0.7:8000; port 1–65535)',
          },
        },
      },
    });
  });

  it('every top-level field has a 10–500 character description (Kong rejects others)', () => {
    for (const [name, f] of Object.entries(byName)) {
      expect(f.description, name).toBeTypeOf('string');
      expect(f.description!.length, name).toBeGreaterThanOrEqual(10);
      expect(f.description!.length, name).toBeLessThanOrEqual(500);
    }
  });

  it('refuses a field without a usable description', () => {
    expect(() =>
      toKongSchema(Type.Object({ a: Type.String({ default: 'x', description: 'short' }) })),
    ).toThrow(/a: description must be 10–500 characters/);
    expect(() => toKongSchema(Type.Object({ a: Type.String({ default: 'x' }) }))).toThrow(
      /needs a description/,
    );
  });

  it('x-kong attributes override derived ones (an explicit Lua match for an untranslatable regex)', () => {
    const s = Type.Object({
      a: Type.String({
        pattern: '^(?:x|y)+$',
        description: 'a field with a regex Lua cannot express',
        'x-kong': { match: '^[xy]+$' },
      }),
    });
    expect(() =>
      toKongSchema(
        Type.Object({ a: Type.String({ pattern: '^(?:x|y)+$', description: 'no override here at all' }) }),
      ),
    ).toThrow(/groups and alternation/);
    expect(toKongSchema(s)).toEqual([
      {
        a: {
          type: 'string',
          required: true,
          match: '^[xy]+$',
          description: 'a field with a regex Lua cannot express',
        },
      },
    ]);
  });

  it("Kong's defaults are the TypeBox defaults: an empty Kong config validates to the same values", () => {
    const kong = processPluginConfig(fields, {});
    expect(kong.ok).toBe(true);
    if (!kong.ok) return;
    const ours = validateConfig(PluginConfigSchema, {}, 'test') as Record<string, unknown>;
    for (const [k, v] of Object.entries(kong.config)) expect(v, k).toEqual(ours[k]);
    // and the processed config is accepted by the plugin's own validation
    expect(() => validateConfig(PluginConfigSchema, kong.config, 'kong processed')).not.toThrow();
  });
});

describe('regexToLua', () => {
  it('translates the patterns our config uses', () => {
    expect(regexToLua('^rediss?://')).toEqual({ match: '^rediss?://' });
    expect(regexToLua('^https?://')).toEqual({ match: '^https?://' });
    expect(regexToLua('^[A-Za-z0-9_.:-]{1,64}$')).toEqual({
      match: '^[A-Za-z0-9_.:%-]+$',
      len_min: 1,
      len_max: 64,
    });
    expect(regexToLua('^(tiktoken:[a-z0-9_]+|hf:[^\\n\\r]+)$')).toEqual({
      match_any: {
        patterns: ['^tiktoken:[a-z0-9_]+$', '^hf:[^\n\r]+$'],
        err: 'must match ^(tiktoken:[a-z0-9_]+|hf:[^\\n\\r]+)$',
      },
    });
    expect(regexToLua('^[^: \\t\\n\\v\\f\\r]+:[0-9]{1,5}$')).toEqual({
      match: '^[^: \t\n\v\f\r]+:[0-9][0-9]?[0-9]?[0-9]?[0-9]?$',
    });
    expect(regexToLua('a\\.b%c')).toEqual({ match: 'a%.b%%c' });
  });

  it('refuses what Lua patterns cannot express', () => {
    expect(() => regexToLua('^(a|b)c$')).toThrow(/alternation/);
    expect(() => regexToLua('^a(?=b)')).toThrow();
    expect(() => regexToLua('x{1,40}y')).toThrow(/too wide/);
    expect(() => regexToLua('\\bword')).toThrow(/unsupported escape/);
    expect(() => regexToLua('a+?')).toThrow(/lazy/);
    // Not exact: JS's . stops at line ends and JS's \s takes Unicode spaces; Lua's do neither.
    expect(() => regexToLua('^hf:.+$')).toThrow(/\[\^\\n\\r\]/);
    expect(() => regexToLua('^[^:\\s]+$')).toThrow(/unsupported escape \\s/);
    expect(() => regexToLua('^\\S+$')).toThrow(/unsupported escape \\S/);
  });

  const patterns = [...new Set(patternsIn(PluginConfigSchema as unknown as TObject))];
  // Line ends and non-ASCII spaces too: where JS's . and \s and Lua's . and %s part ways.
  const alphabet = fc.constantFrom(
    ...'abcdehfikmnoprstuxz0123456789:/._- \t\n\r\v\f\u00a0\u2028@[]{}()|+%^$é'.split(''),
  );
  const samples: Record<string, string[]> = {};
  const examples = [
    'redis://127.0.0.1:6379/0',
    'rediss://h:1/2',
    'redis:/x',
    'tiktoken:o200k_base',
    'tiktoken:O200',
    'hf:/a/b.json',
    'hf:',
    'chatml',
    'harmony',
    'llama3',
    'none',
    'chatmlx',
    'hf:x',
    'kinf',
    'a'.repeat(64),
    'a'.repeat(65),
    '',
    'p:1',
    'p:123456',
    'p :1',
    'http://j:4318/v1/traces',
    'https://x',
    'ftp://x',
    '10.0.0.7:8000',
    'hf:/models/qwen3/tokenizer_config.json\n', // a YAML | block
    'hf:a\nb',
    'a\u00a0b:1',
    'a\u2028b:1',
    'hf:a\u2028b',
  ];
  for (const p of patterns) samples[p] = examples;

  it('agrees with the JS regex on every config pattern (examples and random strings)', () => {
    expect(patterns.length).toBeGreaterThanOrEqual(5);
    for (const p of patterns) {
      const re = new RegExp(p);
      const lua = regexToLua(p);
      for (const v of samples[p]!)
        expect(kongAccepts(lua, v), `${p} on ${JSON.stringify(v)}`).toBe(re.test(v));
      fc.assert(
        fc.property(
          fc.array(alphabet, { maxLength: 70 }).map((cs) => cs.join('')),
          (v) => kongAccepts(lua, v) === re.test(v),
        ),
        { numRuns: 300 },
      );
    }
  });
});
