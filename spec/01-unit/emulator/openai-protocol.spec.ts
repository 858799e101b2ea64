import { describe, expect, it } from 'vitest';
import { parseSamplingParams, type Json } from '../../../emulator/server/openai-protocol.js';

const BODY: Json = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
const modeOf = (xargs: unknown, chat = true): string => {
  const r = parseSamplingParams({ ...BODY, vllm_xargs: xargs }, chat);
  if (!r.ok) throw new Error(r.message);
  return r.value.kvCacheReportMode;
};
const rejection = (xargs: unknown) => {
  const r = parseSamplingParams({ ...BODY, vllm_xargs: xargs }, true);
  return r.ok ? null : { param: r.param, message: r.message };
};

describe('parseSamplingParams: vllm_xargs (dict[str, str | int | float | list[str | int | float]] | None)', () => {
  it('defaults kv_cache_report_mode to "incremental" when vllm_xargs is absent, null, or lacks the key', () => {
    const r = parseSamplingParams(BODY, true);
    expect(r.ok && r.value.kvCacheReportMode).toBe('incremental');
    expect(modeOf(null)).toBe('incremental');
    expect(modeOf({})).toBe('incremental');
    expect(modeOf({ other: 'x', n: 3, l: ['a', 1, 2.5] })).toBe('incremental');
  });

  it('reads kv_cache_report_mode as given, for chat and completions', () => {
    expect(modeOf({ kv_cache_report_mode: 'full' })).toBe('full');
    expect(modeOf({ kv_cache_report_mode: 'full' }, false)).toBe('full');
    expect(modeOf({ kv_cache_report_mode: 'incremental' })).toBe('incremental');
    // vLLM does not validate the mode: any string is accepted and only "full" does anything.
    expect(modeOf({ kv_cache_report_mode: 'FULL' })).toBe('FULL');
  });

  it('accepts values pydantic accepts but never reads a non-string mode as "full"', () => {
    // Lax mode coerces booleans to int, so they pass validation.
    expect(modeOf({ flag: true, list: [false, 'x'] })).toBe('incremental');
    expect(modeOf({ kv_cache_report_mode: ['full'] })).not.toBe('full');
    expect(modeOf({ kv_cache_report_mode: 1 })).not.toBe('full');
  });

  it('rejects a vllm_xargs that is not an object with a 400 naming vllm_xargs', () => {
    for (const x of ['full', 1, true, [], [{ kv_cache_report_mode: 'full' }]])
      expect(rejection(x), JSON.stringify(x)).toEqual({
        param: 'vllm_xargs',
        message: 'vllm_xargs: Input should be a valid dictionary',
      });
  });

  it('rejects nested objects, nested lists and nulls as values', () => {
    for (const v of [{ a: 1 }, [[1]], [{ a: 1 }], null, [null]])
      expect(rejection({ kv_cache_report_mode: 'full', bad: v }), JSON.stringify(v)).toEqual({
        param: 'vllm_xargs',
        message: 'vllm_xargs.bad: Input should be a valid string, number, or list of strings and numbers',
      });
  });
});
