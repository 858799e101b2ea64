import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { blockKeys, keySeed } from '../../../src/core/block-keys.js';
import { PluginConfigSchema } from '../../../src/config/plugin-config.js';
import { validateConfig } from '../../../src/config/validate.js';
import { requestKeys } from '../../../src/router/index.js';

/**
 * Two requests with different cache_salt values never share cached credit: no block key of one is a block
 * key of the other, whatever the prompts (the same, one a prefix of the other, or unrelated), the model and
 * the LoRA adapter. A salted chain shares nothing with the unsalted one either. docs/security.md.
 */

const BLOCK = 16;
const salt = fc.string({ minLength: 1, maxLength: 40, unit: 'binary' });
const tokens = fc.array(fc.integer({ min: 0, max: 200_000 }), { minLength: BLOCK, maxLength: 12 * BLOCK });

function shared(a: readonly string[], b: readonly string[]): string[] {
  const s = new Set(a);
  return b.filter((k) => s.has(k));
}

describe('cache_salt isolation on block keys', () => {
  it('different salts: no key in common, for any prompts, model and LoRA', () => {
    fc.assert(
      fc.property(
        fc.tuple(salt, salt).filter(([a, b]) => a !== b),
        tokens,
        fc.option(tokens, { nil: undefined }),
        fc.string({ minLength: 1, maxLength: 20 }),
        fc.option(fc.string({ minLength: 1, maxLength: 12 }), { nil: null }),
        ([s1, s2], t1, other, model, lora) => {
          // The second prompt: the same one, or the first with more after it, or another.
          const t2 = other === undefined ? t1 : [...t1, ...other];
          const k1 = blockKeys(t1, BLOCK, keySeed({ model, lora, cacheSalt: s1 }));
          const k2 = blockKeys(t2, BLOCK, keySeed({ model, lora, cacheSalt: s2 }));
          expect(shared(k1, k2)).toEqual([]);
          const plain = blockKeys(t1, BLOCK, keySeed({ model, lora, cacheSalt: null }));
          expect(shared(k1, plain)).toEqual([]);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('the same salt still shares the common prefix (the isolation is the salt’s, not lost caching)', () => {
    fc.assert(
      fc.property(salt, tokens, tokens, (s, t1, more) => {
        const seed = keySeed({ model: 'm', cacheSalt: s });
        const k1 = blockKeys(t1, BLOCK, seed);
        expect(blockKeys([...t1, ...more], BLOCK, seed).slice(0, k1.length)).toEqual(k1);
      }),
      { numRuns: 200 },
    );
  });

  it('through the router’s own key computation (real tokenizer and template), random salts and prompts', async () => {
    const config = validateConfig(
      PluginConfigSchema,
      { tokenizer: 'tiktoken:o200k_base', chat_template: 'chatml', redis_url: 'redis://127.0.0.1:1' },
      'test config',
    );
    const system = 'You are the support desk of ACME. Answer from the manual only. '.repeat(20);
    await fc.assert(
      fc.asyncProperty(
        fc.tuple(salt, salt).filter(([a, b]) => a !== b),
        fc.string({ maxLength: 200 }),
        async ([s1, s2], user) => {
          const body = (cache_salt: string) =>
            JSON.stringify({
              model: 'm',
              messages: [
                { role: 'system', content: system },
                { role: 'user', content: user },
              ],
              cache_salt,
            });
          const k1 = await requestKeys(config, body(s1));
          const k2 = await requestKeys(config, body(s2));
          expect(k1.length).toBeGreaterThan(10);
          expect(shared(k1, k2)).toEqual([]);
        },
      ),
      { numRuns: 60 },
    );
  });
});
