// `kinference verify-tokenizer`: renders and tokenizes sample chats, compares with each pod's /tokenize.
import { readFileSync } from 'node:fs';
import { boundedDetail } from '../core/bounded-detail.js';
import { KinferenceError } from '../core/errors.js';
import { parseChatRequest } from '../core/request.js';
import { loadFleetConfig, type FleetConfig, type PodConfig } from '../config/fleet-config.js';
import { defaultTemplateKwargs } from '../config/plugin-config.js';
import { compareTokens, type TokenComparison } from '../tokenize/compare-tokens.js';
import { loadChatTemplate } from '../tokenize/load-chat-template.js';
import { loadTokenizer } from '../tokenize/load-tokenizer.js';

// `kinference verify-tokenizer`: the fleet file and each pod's HTTP /tokenize (the I/O edge) around the pure
// compareTokens of src/tokenize.

/** Conversations that exercise system prompts, multiple turns, non-ASCII text and specials-like text. */
export const SAMPLE_BODIES: { name: string; body: Record<string, unknown> }[] = [
  {
    name: 'system+user',
    body: {
      messages: [
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'user', content: 'Summarise the plot of Hamlet in two sentences.' },
      ],
    },
  },
  {
    name: 'multi-turn',
    body: {
      messages: [
        { role: 'user', content: 'Translate "good morning" to French, Japanese and Greek.' },
        { role: 'assistant', content: 'Bonjour; おはようございます; Καλημέρα.' },
        { role: 'user', content: 'Now in Chinese, with an emoji 😀.\n\n  Keep   the spacing.' },
      ],
    },
  },
  {
    name: 'code',
    body: {
      messages: [{ role: 'user', content: 'def f(x):\n    return x ** 2  # square\n\nprint(f(12345))\n' }],
    },
  },
];

export interface VerifyResult extends TokenComparison {
  pod: string;
  model: string;
  sample: string;
  error?: string;
  /** A few ids around the first mismatch, for a human to decode. */
  ours_near?: number[];
  theirs_near?: number[];
}

export interface VerifyOptions {
  config: string;
  pod?: string;
  body?: string;
  timeoutMs?: number;
}

function podsToCheck(cfg: FleetConfig, podId: string | undefined): PodConfig[] {
  const pods = cfg.pods ?? [];
  if (pods.length === 0)
    throw new KinferenceError(
      'KINF_ERR_CONFIG',
      'verify-tokenizer needs a static `pods:` list in the fleet config',
    );
  if (podId !== undefined) {
    const p = pods.find((x) => x.id === podId);
    if (!p) throw new KinferenceError('KINF_ERR_CONFIG', `pod "${podId}" is not in the fleet config`);
    return [p];
  }
  const byModel = new Map<string, PodConfig>();
  for (const p of pods) if (!byModel.has(p.model)) byModel.set(p.model, p);
  return [...byModel.values()];
}

function readBody(path: string): Record<string, unknown> {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new KinferenceError(
      'KINF_ERR_CONFIG_FILE',
      `${path}: cannot read a JSON request body: ${(e as Error).message}`,
    );
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw new KinferenceError('KINF_ERR_CONFIG_FILE', `${path}: not a JSON object`);
  return json as Record<string, unknown>;
}

/** The chat form of vLLM's POST /tokenize (docs/emulator.md), with the same tools and template kwargs. */
export function tokenizeRequestBody(model: string, body: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {
    model,
    messages: body.messages,
    add_generation_prompt: body.add_generation_prompt !== false,
    continue_final_message: body.continue_final_message === true,
    add_special_tokens: false,
  };
  for (const k of ['tools', 'chat_template_kwargs'] as const) if (body[k] !== undefined) out[k] = body[k];
  return out;
}

async function podTokens(
  address: string,
  payload: Record<string, unknown>,
  timeoutMs: number,
): Promise<number[]> {
  const res = await fetch(`http://${address}/tokenize`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(payload),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${boundedDetail(text)}`);
  const json = JSON.parse(text) as { tokens?: unknown };
  if (!Array.isArray(json.tokens) || !json.tokens.every((t) => typeof t === 'number'))
    throw new Error('response has no numeric `tokens` array');
  return json.tokens as number[];
}

/** fetch() rejects with "fetch failed" alone; the reason (ECONNREFUSED, ENOTFOUND…) is its cause. */
function describeFetchError(e: unknown): string {
  const msg = e instanceof Error ? e.message : String(e);
  const cause = e instanceof Error ? e.cause : undefined;
  return cause instanceof Error ? `${msg}: ${cause.message}` : msg;
}

/** Renders + tokenizes each sample with our tokenizer and compares with each pod's /tokenize. */
export async function verifyTokenizer(opts: VerifyOptions): Promise<VerifyResult[]> {
  const cfg = loadFleetConfig(opts.config);
  const samples = opts.body !== undefined ? [{ name: opts.body, body: readBody(opts.body) }] : SAMPLE_BODIES;
  const results: VerifyResult[] = [];
  for (const pod of podsToCheck(cfg, opts.pod)) {
    const m = cfg.models[pod.model];
    if (!m) continue;
    const tokenizer = loadTokenizer(m.tokenizer);
    const template = loadChatTemplate(m.chat_template, defaultTemplateKwargs(m.default_chat_template_kwargs));
    for (const s of samples) {
      const base = { pod: pod.id, model: pod.model, sample: s.name };
      const parsed = parseChatRequest({ ...s.body, model: pod.model });
      if (!parsed.ok) {
        results.push({ ...base, ...unchecked(0), error: `body: ${parsed.detail}` });
        continue;
      }
      const ours = await tokenizer.encode(template.render(parsed.request));
      let theirs: number[];
      try {
        theirs = await podTokens(
          pod.address,
          tokenizeRequestBody(pod.model, s.body),
          opts.timeoutMs ?? 10_000,
        );
      } catch (e) {
        results.push({ ...base, ...unchecked(ours.length), error: `pod: ${describeFetchError(e)}` });
        continue;
      }
      const cmp = compareTokens(ours, theirs);
      const r: VerifyResult = { ...base, ...cmp };
      if (cmp.first_mismatch !== null) {
        const from = Math.max(0, cmp.first_mismatch - 3);
        r.ours_near = ours.slice(from, cmp.first_mismatch + 5);
        r.theirs_near = theirs.slice(from, cmp.first_mismatch + 5);
      }
      results.push(r);
    }
  }
  return results;
}

/** A sample that could not be compared: no match, and no mismatch index either (it would read as one at 0). */
function unchecked(oursCount: number): Omit<VerifyResult, 'pod' | 'model' | 'sample'> {
  return { match: false, first_mismatch: null, ours_count: oursCount, theirs_count: 0 };
}

export function formatTable(results: VerifyResult[]): string {
  const rows = results.map((r) =>
    [
      r.pod,
      r.model,
      r.sample,
      // A pod that did not answer says nothing about the tokenizer: not a MISMATCH.
      r.match ? 'match' : r.error !== undefined ? 'ERROR' : 'MISMATCH',
      String(r.first_mismatch ?? '-'),
      `${r.ours_count}/${r.theirs_count}`,
      r.error ?? '',
    ].join('\t'),
  );
  return ['pod\tmodel\tsample\tresult\tfirst_mismatch\tours/theirs\terror', ...rows].join('\n');
}
