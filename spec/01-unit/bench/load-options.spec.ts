import { describe, expect, it } from 'vitest';
import {
  parseLoadArgs,
  recordedCommand,
  UsageError,
  type LoadOptions,
} from '../../../bench/lib/load/options.js';

const base = ['--url', 'http://kong:8000/v1/chat/completions', '--model', 'm', '--workload', 'multiturn'];
const parse = (...extra: string[]): LoadOptions => parseLoadArgs([...base, ...extra]) as LoadOptions;

describe('bench:load options', () => {
  it('takes the study’s windows per profile, GuideLLM’s client, and a fresh salt per run', () => {
    const open = parse('--rate', '0.5');
    expect(open.profiles).toEqual([
      {
        kind: 'poisson',
        rate: 0.5,
        warmupS: 60,
        measureS: 240,
        cooldownS: 45,
        arrivals: 'poisson',
        clientWorkers: 10,
      },
    ]);
    const closed = parse('--concurrency', '8', '--measure-s', '30');
    expect(closed.profiles).toEqual([
      {
        kind: 'concurrent',
        streams: 8,
        warmupS: 60,
        measureS: 30,
        cooldownS: 60,
        clientWorkers: 10,
      },
    ]);
    expect(open.salt).toMatch(/^[a-z]{6}$/);
    expect(open.salt).not.toBe(closed.salt);
    expect(open).toMatchObject({ trials: 1, seed: 42, itlSloMs: 100, ttftSloMs: null, ttftPadding: 0.25 });
    expect(open.idleTimeoutMs).toBe(300_000);
    expect(open.keepAliveMs).toBe(5000);
    expect(open.name).toBe('load-multiturn');
  });

  it('a list of rates or concurrencies is a sweep, run in the order given', () => {
    const sweep = parse('--concurrency', '4,8, 16');
    expect(sweep.profiles.map((p) => (p.kind === 'concurrent' ? p.streams : null))).toEqual([4, 8, 16]);
    expect(() => parse('--rate', '0.2,0.2')).toThrow('a profile is listed twice: 0.2,0.2');
    expect(() => parse('--concurrency', '4,x')).toThrow('--concurrency x: expected a whole number ≥ 1');
  });

  it('overrides a workload’s token counts by name and keeps headers', () => {
    const o = parse(
      '--rate',
      '1',
      '--shape',
      'turns=4,firstPromptTokens=2000',
      '--header',
      'Authorization: Bearer a:b',
    );
    expect(o.shapes.multiturn).toEqual({
      turns: 4,
      firstPromptTokens: 2000,
      promptTokens: 400,
      outputTokens: 200,
    });
    expect(o.shapes.control.promptTokens).toBe(16_256);
    expect(o.headers).toEqual({ authorization: 'Bearer a:b' });
  });

  it.each([
    [['--rate', '1', '--concurrency', '2'], 'give exactly one of --rate'],
    [[], 'give exactly one of --rate'],
    [['--concurrency', '2.5'], '--concurrency 2.5: expected a whole number ≥ 1'],
    [['--rate=-1'], '--rate -1: expected a number'],
    [['--rate', '1', '--turns', '3'], "Unknown option '--turns'"],
    [['--rate'], "Option '--rate <value>' argument missing"],
    [['--concurrency', '2', '--arrivals', 'guidellm'], '--arrivals applies to --rate only'],
    [['--rate', '1', '--arrivals', 'bursty'], '--arrivals bursty: poisson or guidellm'],
    [['--rate', '1', '--shape', 'prefixTokens=10'], 'multiturn has turns=8, firstPromptTokens=8000'],
    [['--rate', '1', '--shape', 'turns=0'], '--shape turns 0: expected a whole number ≥ 1'],
    [['--rate', '1', '--salt', 'a-b'], '--salt a-b: 1 to 6 letters'],
    [['--rate', '1', '--salt', 'abcdefg'], '--salt abcdefg: 1 to 6 letters'],
    [['--rate', '1', '--salt', 'abc123'], '--salt abc123: 1 to 6 letters'],
    [['--rate', '1', '--header', 'novalue'], "--header novalue: expected 'Name: value'"],
    [['--rate', '1', '--header', 'x-key: a\nb'], '--header x-key: Invalid character in header content'],
    [['--rate', '1', '--header', 'bad name: v'], '--header bad name: Header name must be a valid HTTP token'],
  ])('%j is refused: %s', (extra, message) => {
    expect(() => parse(...extra)).toThrow(UsageError);
    expect(() => parse(...extra)).toThrow(message);
  });

  it('needs a http(s) url, a model and a known workload', () => {
    expect(() => parseLoadArgs(['--model', 'm', '--workload', 'control', '--rate', '1'])).toThrow(
      '--url is required',
    );
    expect(() =>
      parseLoadArgs(['--url', 'ftp://x/', '--model', 'm', '--workload', 'control', '--rate', '1']),
    ).toThrow('http or https only');
    expect(() => parseLoadArgs(['--url', 'http://x/', '--workload', 'control', '--rate', '1'])).toThrow(
      '--model is required',
    );
    expect(() =>
      parseLoadArgs(['--url', 'http://x/', '--model', 'm', '--workload', 'chat', '--rate', '1']),
    ).toThrow('--workload: one of control, shared-prefix, multiturn');
  });

  it('records the command without header values or URL credentials, in either form, quoted for a shell', () => {
    const argv = [
      '--url',
      'https://alice:s3cret@kong.example.com/v1/chat/completions',
      '--url=http://bob:hunter2@x/v1',
      '--header',
      'Authorization: Bearer tok1',
      '--header=X-Api-Key: tok2',
      '--salt',
      "it's",
      '--rate',
      '0.5',
    ];
    const cmd = recordedCommand(argv);
    expect(cmd).not.toMatch(/s3cret|hunter2|tok1|tok2|alice|bob/);
    expect(cmd).toBe(
      'npm run bench:load -- --url https://kong.example.com/v1/chat/completions --url=http://x/v1 ' +
        "--header 'Authorization: …' '--header=X-Api-Key: …' --salt 'it'\\''s' --rate 0.5",
    );
  });

  it('--compare takes exactly two files', () => {
    expect(parseLoadArgs(['--compare', 'a.json', 'b.json'])).toMatchObject({
      compare: ['a.json', 'b.json'],
      name: null,
    });
    expect(() => parseLoadArgs(['--compare', 'a.json'])).toThrow('--compare takes two results files');
  });
});
