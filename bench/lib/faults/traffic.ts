// The fault bench's independent client: closed-loop streaming and non-streaming chat with shared prefixes.
import { Sfc32, splitmixWords } from '../../../harness/sfc32.js';

/** One request as the client saw it. */
export interface RequestRecord {
  /** ms since the traffic started. */
  startMs: number;
  endMs: number;
  stream: boolean;
  ok: boolean;
  status: number;
  /** Why it failed (HTTP status, network error, a stream cut short). */
  error?: string;
  promptTokens: number;
  cachedTokens: number;
}

export interface TrafficOptions {
  url: string;
  model: string;
  /** Concurrent closed-loop streams. */
  streams: number;
  /** Distinct shared system prompts (conversation groups). */
  groups: number;
  /** Words per system prompt (about one token each). */
  prefixWords: number;
  maxTokens: number;
  seed: number;
  requestTimeoutMs?: number;
}

const WORDS = (
  'alpha river stone cloud garden signal bridge market engine silver orange window harbor planet ' +
  'forest copper winter summer mirror pocket rocket candle velvet thunder meadow castle anchor ' +
  'basket canyon desert falcon glacier hammer island jungle kettle ladder magnet needle ocean ' +
  'pepper quartz saddle temple umbrella valley wagon yellow zebra branch circle dragon feather'
).split(' ');

/** A group's shared system prompt: seeded words, so every run sends the same prefixes. */
export function systemPrompt(group: number, words: number, seed: number): string {
  const rng = new Sfc32(splitmixWords(seed * 1000 + group));
  const out: string[] = [`You are assistant number ${group}. Policy manual follows.`];
  for (let i = 0; i < words; i++) out.push(WORDS[rng.int(WORDS.length)]!);
  return out.join(' ');
}

/**
 * Keeps `streams` requests in flight through the gateway until stopped: each picks a group at random,
 * asks a fresh question after that group's system prompt, streaming every other request. Records
 * everything; never throws (a failure is a record).
 */
export class Traffic {
  readonly records: RequestRecord[] = [];
  readonly t0 = Date.now();
  #stopped = false;
  #loops: Promise<void>[] = [];
  #prompts: string[];
  #n = 0;
  /** Start times of the requests in flight, by request number. */
  #inFlight = new Map<number, number>();

  constructor(readonly o: TrafficOptions) {
    this.#prompts = Array.from({ length: o.groups }, (_, g) => systemPrompt(g, o.prefixWords, o.seed));
  }

  now(): number {
    return Date.now() - this.t0;
  }

  start(): void {
    for (let w = 0; w < this.o.streams; w++) this.#loops.push(this.#loop(w));
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.#loops);
  }

  /** Resolves once every request started before `ms` has its record. */
  async settled(ms: number): Promise<void> {
    while ([...this.#inFlight.values()].some((t) => t < ms)) await new Promise((r) => setTimeout(r, 50));
  }

  async #loop(w: number): Promise<void> {
    const rng = new Sfc32(splitmixWords(this.o.seed + 7919 * (w + 1)));
    for (let k = 0; !this.#stopped; k++) {
      const group = rng.int(this.o.groups);
      const stream = (k + w) % 2 === 0;
      const n = this.#n++;
      this.#inFlight.set(n, this.now());
      this.records.push(await this.#one(group, stream, n));
      this.#inFlight.delete(n);
    }
  }

  async #one(group: number, stream: boolean, n: number): Promise<RequestRecord> {
    const startMs = this.now();
    const rec: RequestRecord = {
      startMs,
      endMs: startMs,
      stream,
      ok: false,
      status: 0,
      promptTokens: 0,
      cachedTokens: 0,
    };
    const body = {
      model: this.o.model,
      messages: [
        { role: 'system', content: this.#prompts[group] },
        { role: 'user', content: `Question ${n}: what does clause ${n % 97} say about item ${n}?` },
      ],
      max_tokens: this.o.maxTokens,
      stream,
      ...(stream ? { stream_options: { include_usage: true } } : {}),
    };
    try {
      const r = await fetch(`${this.o.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.o.requestTimeoutMs ?? 60_000),
      });
      rec.status = r.status;
      const text = await r.text();
      if (r.status !== 200) {
        rec.error = `HTTP ${r.status}: ${text.slice(0, 120)}`;
      } else if (stream) {
        if (!/data: \[DONE\]/.test(text)) rec.error = 'stream ended without [DONE]';
        else {
          rec.ok = true;
          for (const line of text.split('\n')) {
            if (!line.startsWith('data: {')) continue;
            const u = (JSON.parse(line.slice(6)) as { usage?: Usage }).usage;
            if (u) this.#usage(rec, u);
          }
        }
      } else {
        const u = (JSON.parse(text) as { usage?: Usage }).usage;
        rec.ok = true;
        if (u) this.#usage(rec, u);
      }
    } catch (e) {
      rec.error = e instanceof Error ? `${e.name}: ${e.message}`.slice(0, 160) : String(e);
    }
    rec.endMs = this.now();
    return rec;
  }

  #usage(rec: RequestRecord, u: Usage): void {
    rec.promptTokens = u.prompt_tokens ?? 0;
    rec.cachedTokens = u.prompt_tokens_details?.cached_tokens ?? 0;
  }
}

interface Usage {
  prompt_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
}
