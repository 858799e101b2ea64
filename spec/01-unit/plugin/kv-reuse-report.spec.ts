import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { withKvReuseReport } from '../../../plugins/kinference/kv-reuse-report.js';

const MEMBER = '"vllm_xargs":{"kv_cache_report_mode":"full"}';

describe('withKvReuseReport', () => {
  it('adds vllm_xargs as the first member and keeps every other byte as sent', () => {
    const sent = ' \n{ "model":"m","seed":18446744073709551615,"temperature":1.0,"messages":[]}\n';
    const out = withKvReuseReport(Buffer.from(sent))!.toString('utf8');
    expect(out).toBe(
      ` \n{${MEMBER}, "model":"m","seed":18446744073709551615,"temperature":1.0,"messages":[]}\n`,
    );
    expect(JSON.parse(out).vllm_xargs).toEqual({ kv_cache_report_mode: 'full' });
  });

  it('takes a string body too, and an empty object gets no comma', () => {
    expect(withKvReuseReport('{}')!.toString()).toBe(`{${MEMBER}}`);
    expect(withKvReuseReport('{ \t}')!.toString()).toBe(`{${MEMBER} \t}`);
    expect(withKvReuseReport('{"m":"é"}')!.toString('utf8')).toBe(`{${MEMBER},"m":"é"}`);
  });

  it('leaves anything but a JSON object alone', () => {
    for (const b of ['', '   ', '[1]', '"x"', '\uFEFF{}', 'null']) expect(withKvReuseReport(b)).toBeNull();
  });

  it('any JSON object without vllm_xargs parses to itself plus the report mode', () => {
    const ws = fc.constantFrom('', ' ', '\n', '\t', '\r\n  ');
    fc.assert(
      fc.property(
        fc.dictionary(
          fc.string().filter((k) => k !== 'vllm_xargs'),
          fc.jsonValue(),
        ),
        ws,
        ws,
        (obj, before, inside) => {
          const text = `${before}{${inside}${JSON.stringify(obj).slice(1)}`;
          const out = withKvReuseReport(Buffer.from(text))!.toString('utf8');
          expect(JSON.parse(out)).toEqual({
            vllm_xargs: { kv_cache_report_mode: 'full' },
            ...JSON.parse(text),
          });
          expect(out.replace(MEMBER + (Object.keys(obj).length > 0 ? ',' : ''), '')).toBe(text);
        },
      ),
    );
  });
});
