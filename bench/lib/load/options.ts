// bench:load's options and usage: one run against any OpenAI-compatible endpoint, or a comparison.
import { UsageError } from '../cli.js';
import { randomBytes } from 'node:crypto';
import { validateHeaderName, validateHeaderValue } from 'node:http';
import { parseArgs } from 'node:util';
import { GUIDELLM_WORKERS, WORKLOAD_NAMES, type Profile, type WorkloadName } from '../types.js';
import { PUBLISHED_SHAPES, type WorkloadShapes } from '../workload/workloads.js';
import { SEED_SCHEDULE } from '../schedule.js';

/** One `bench:load` run against an OpenAI-compatible endpoint (a Kong route, a Service, a pod). */
export interface LoadOptions {
  url: URL;
  model: string;
  workload: WorkloadName;
  shapes: WorkloadShapes;
  /** Run one after the other (a sweep), in the order given. */
  profiles: Profile[];
  trials: number;
  seed: number;
  /** Leads every prompt (letters and digits): a fresh one per run unless given. */
  salt: string;
  headers: Record<string, string>;
  /** A byte-level BPE tokenizer.json for token-exact prompts; null = the bundled Qwen3 one. */
  tokenizerJson: string | null;
  /** TTFT bound in ms; null = measure the idle uncached TTFT first and add `ttftPadding`. */
  ttftSloMs: number | null;
  ttftPadding: number;
  itlSloMs: number;
  idleTimeoutMs: number;
  keepAliveMs: number;
  /** Abort when this many requests in a row failed before any succeeded. */
  failFast: number;
  resamples: number;
  name: string;
  outDir: string;
}

export interface CompareOptions {
  compare: [string, string];
  resamples: number;
  /** Also write the table to <outDir>/<name>.md. */
  name: string | null;
  outDir: string;
}

export const LOAD_USAGE = `npm run bench:load -- --url URL --model NAME --workload control|shared-prefix|multiturn
                      (--rate R | --concurrency N) [options]
npm run bench:load -- --compare BASELINE.json CANDIDATE.json [--name NAME]

  --url URL              the chat completions endpoint (http or https), e.g. http://kong:8000/v1/chat/completions
  --model NAME           the model field of every request
  --workload W           control, shared-prefix or multiturn (the published shapes)
  --rate R[,R...]        Poisson open loop at R requests/s (windows 60/240/45 s); a list runs a sweep
  --concurrency N[,N...] N closed-loop streams (windows 60/180/60 s); a list runs a sweep, e.g. 4,8,16,24,32
  --warmup-s/--measure-s/--cooldown-s S   override the windows
  --arrivals A           poisson (independent gaps, default) or guidellm (GuideLLM's own schedule)
  --client-workers N     client worker processes, each with its conversations and connections (default 10)
  --trials N             repetitions, fresh prompts each (default 1)
  --seed N               prompts and arrivals (default 42); two runs with one seed pair request by request
  --salt S               prompt salt (1-6 letters; default 6 random letters, so no run hits
                         another's cache; a sweep's later profiles draw their own)
  --shape k=v,...        override the workload's token counts (e.g. prefixTokens=4000,prefixCount=8)
  --tokenizer FILE       the served model's tokenizer.json (byte-level BPE) for token-exact prompts
                         (default: Qwen3's, bundled)
  --header 'K: V'        extra request header (repeatable), e.g. 'Authorization: Bearer ...'
  --ttft-slo-ms MS       goodput's TTFT bound (default: measured idle uncached TTFT + --slo-padding)
  --slo-padding P        default 0.25
  --itl-slo-ms MS        goodput's ITL bound (default 100)
  --timeout-s S          fail a request whose stream is silent this long (default 300, GuideLLM's)
  --keepalive-s S        idle connections close after this long (default 5, httpx's)
  --fail-fast N          stop when the first N requests all fail (default 5)
  --resamples N          bootstrap resamples of the CIs (default 2000, at least 100)
  --name NAME            results file name (default load-<workload>)
  --out-dir DIR          default bench/results`;

export { UsageError };

/**
 * Six random lowercase letters: a few tokens, so the salt and the conversation's own tag both fall inside
 * the first KV block (16 tokens) and no two runs, or two prompts of one run, share it. (Eight hex digits did
 * not: digits are a token each, which pushed the conversation number past the block.)
 */
export function randomSalt(): string {
  return Array.from(randomBytes(6), (b) => String.fromCharCode(97 + (b % 26))).join('');
}

const shellWord = (a: string): string => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`);

/** `user:password@` out of a URL given on the command line (kept as given when it is not one). */
function withoutCredentials(v: string): string {
  try {
    const u = new URL(v);
    if (!u.username && !u.password) return v;
    u.username = '';
    u.password = '';
    return u.href;
  } catch {
    return v;
  }
}

/**
 * The command line as the results record it: header values and URL credentials left out, in either form
 * (`--header V` or `--header=V`), and quoted so it can be pasted back into a shell.
 */
export function recordedCommand(argv: readonly string[]): string {
  const safe = argv.map((a, i) => {
    const prev = argv[i - 1];
    if (prev === '--header') return `${a.split(':')[0]}: …`;
    if (prev === '--url') return withoutCredentials(a);
    if (a.startsWith('--header=')) return `${a.split(':')[0]}: …`;
    if (a.startsWith('--url=')) return `--url=${withoutCredentials(a.slice('--url='.length))}`;
    return a;
  });
  return ['npm run bench:load --', ...safe.map(shellWord)].join(' ');
}

function num(name: string, v: string | undefined, min: number, integer = false): number | undefined {
  if (v === undefined) return undefined;
  const x = Number(v);
  if (!Number.isFinite(x) || x < min || (integer && !Number.isInteger(x)))
    throw new UsageError(`--${name} ${v}: expected ${integer ? 'a whole number' : 'a number'} ≥ ${min}`);
  return x;
}

/** `--shape k=v,...` on top of the published shape of the workload; unknown keys are an error. */
export function applyShape(w: WorkloadName, spec: string | undefined): WorkloadShapes {
  const shapes = structuredClone(PUBLISHED_SHAPES);
  if (!spec) return shapes;
  const shape = shapes[w] as unknown as Record<string, number>;
  for (const kv of spec.split(',')) {
    const [k, v] = kv.split('=');
    if (k === undefined || v === undefined || !(k in shape))
      throw new UsageError(
        `--shape ${kv}: ${w} has ${Object.keys(shape)
          .map((x) => `${x}=${shape[x]}`)
          .join(', ')}`,
      );
    shape[k] = num(`shape ${k}`, v, 1, true)!;
  }
  return shapes;
}

function parseHeaders(list: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const h of list) {
    const i = h.indexOf(':');
    if (i <= 0) throw new UsageError(`--header ${h}: expected 'Name: value'`);
    const name = h.slice(0, i).trim().toLowerCase();
    const value = h.slice(i + 1).trim();
    try {
      validateHeaderName(name);
      validateHeaderValue(name, value);
    } catch (e) {
      throw new UsageError(`--header ${name}: ${(e as Error).message}`);
    }
    out[name] = value;
  }
  return out;
}

export function parseLoadArgs(argv: string[]): LoadOptions | CompareOptions {
  try {
    return fromArgs(argv);
  } catch (e) {
    // node:util's own errors (an unknown option, a missing value) are usage errors too.
    if (e instanceof Error && 'code' in e && String(e.code).startsWith('ERR_PARSE_ARGS'))
      throw new UsageError(e.message);
    throw e;
  }
}

function fromArgs(argv: string[]): LoadOptions | CompareOptions {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      url: { type: 'string' },
      model: { type: 'string' },
      workload: { type: 'string' },
      rate: { type: 'string' },
      concurrency: { type: 'string' },
      'warmup-s': { type: 'string' },
      'measure-s': { type: 'string' },
      'cooldown-s': { type: 'string' },
      arrivals: { type: 'string' },
      'client-workers': { type: 'string' },
      trials: { type: 'string' },
      seed: { type: 'string' },
      salt: { type: 'string' },
      shape: { type: 'string' },
      tokenizer: { type: 'string' },
      header: { type: 'string', multiple: true },
      'ttft-slo-ms': { type: 'string' },
      'slo-padding': { type: 'string' },
      'itl-slo-ms': { type: 'string' },
      'timeout-s': { type: 'string' },
      'keepalive-s': { type: 'string' },
      'fail-fast': { type: 'string' },
      resamples: { type: 'string' },
      name: { type: 'string' },
      'out-dir': { type: 'string' },
      compare: { type: 'boolean' },
    },
  });
  const outDir = values['out-dir'] ?? 'bench/results';
  const resamples = num('resamples', values.resamples, 100, true) ?? SEED_SCHEDULE.bootstrapResamples;
  if (values.compare) {
    if (positionals.length !== 2) throw new UsageError('--compare takes two results files');
    return { compare: [positionals[0]!, positionals[1]!], resamples, name: values.name ?? null, outDir };
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${positionals[0]}`);

  if (!values.url) throw new UsageError('--url is required');
  let url: URL;
  try {
    url = new URL(values.url);
  } catch {
    throw new UsageError(`--url ${values.url}: not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new UsageError(`--url ${values.url}: http or https only`);
  if (!values.model) throw new UsageError('--model is required (the model field of each request)');
  const workload = values.workload as WorkloadName | undefined;
  if (!workload || !WORKLOAD_NAMES.includes(workload))
    throw new UsageError(`--workload: one of ${WORKLOAD_NAMES.join(', ')}`);

  const list = (name: string, v: string | undefined, min: number, integer: boolean): number[] | undefined =>
    v === undefined ? undefined : v.split(',').map((x) => num(name, x.trim(), min, integer)!);
  const rates = list('rate', values.rate, Number.MIN_VALUE, false);
  const streams = list('concurrency', values.concurrency, 1, true);
  if ((rates === undefined) === (streams === undefined))
    throw new UsageError('give exactly one of --rate (open loop) and --concurrency (closed loop)');
  for (const l of [rates, streams])
    if (l && new Set(l).size !== l.length) throw new UsageError(`a profile is listed twice: ${l.join(',')}`);
  const windows = { ...(rates !== undefined ? SEED_SCHEDULE.latencyWindows : SEED_SCHEDULE.capacityWindows) };
  windows.warmupS = num('warmup-s', values['warmup-s'], 0) ?? windows.warmupS;
  windows.measureS = num('measure-s', values['measure-s'], Number.MIN_VALUE) ?? windows.measureS;
  windows.cooldownS = num('cooldown-s', values['cooldown-s'], 0) ?? windows.cooldownS;
  const clientWorkers = num('client-workers', values['client-workers'], 1, true) ?? GUIDELLM_WORKERS;
  const arrivals = values.arrivals ?? 'poisson';
  if (arrivals !== 'poisson' && arrivals !== 'guidellm')
    throw new UsageError(`--arrivals ${arrivals}: poisson or guidellm`);
  if (rates === undefined && values.arrivals !== undefined)
    throw new UsageError('--arrivals applies to --rate only');
  const profiles: Profile[] =
    rates !== undefined
      ? rates.map((rate) => ({ kind: 'poisson', rate, ...windows, arrivals, clientWorkers }))
      : streams!.map((n) => ({ kind: 'concurrent', streams: n, ...windows, clientWorkers }));

  const salt = values.salt ?? randomSalt();
  if (!/^[a-z]{1,6}$/i.test(salt))
    throw new UsageError(`--salt ${salt}: 1 to 6 letters (it must stay inside the first KV block)`);

  return {
    url,
    model: values.model,
    workload,
    shapes: applyShape(workload, values.shape),
    profiles,
    trials: num('trials', values.trials, 1, true) ?? 1,
    seed: num('seed', values.seed, 0, true) ?? SEED_SCHEDULE.seed,
    salt,
    headers: parseHeaders(values.header ?? []),
    tokenizerJson: values.tokenizer ?? null,
    ttftSloMs: num('ttft-slo-ms', values['ttft-slo-ms'], 1) ?? null,
    ttftPadding: num('slo-padding', values['slo-padding'], 0) ?? SEED_SCHEDULE.slo.ttftPadding,
    itlSloMs: num('itl-slo-ms', values['itl-slo-ms'], 1) ?? SEED_SCHEDULE.slo.itlMs,
    idleTimeoutMs: (num('timeout-s', values['timeout-s'], 0.001) ?? 300) * 1000,
    keepAliveMs: (num('keepalive-s', values['keepalive-s'], 0.001) ?? 5) * 1000,
    failFast: num('fail-fast', values['fail-fast'], 1, true) ?? 5,
    resamples,
    name: values.name ?? `load-${workload}`,
    outDir,
  };
}
