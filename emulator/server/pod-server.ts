import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { EmulatorSection } from '../../src/config/emulator-section.js';
import type { ModelConfig, PodConfig } from '../../src/config/fleet-config.js';
import { parseChatRequest } from '../../src/core/request.js';
import type { ChatTemplate, Tokenizer } from '../../src/tokenize/types.js';
import { ENGINE_HASH_ALGO, noneHashFromSeed, randomNoneHash } from '../engine/block-hash.js';
import { Engine } from '../engine/engine.js';
import { hashString32 } from '../engine/rng.js';
import type { FinishedRequest, TokenOutput } from '../engine/types.js';
import { engineOptionsFor, type EngineProfile } from '../profiles.js';
import { offsetEndpoint } from '../../src/collector/pods.js';
import { readJsonBody, sendError, sendJson } from './http-util.js';
import { KvEventPublisher } from './kv-publisher.js';
import { LiveEngineCore, type RequestListener } from './live-core.js';
import {
  chatChunk,
  chatResponse,
  chatRoleChunk,
  completionChunk,
  completionResponse,
  parsePrompt,
  parseSamplingParams,
  sse,
  usageChunk,
  usageJson,
  type ChunkHead,
  type Json,
  type SamplingParams,
} from './openai-protocol.js';
import type { OutputVocab } from './output-vocab.js';
import { VllmMetrics } from './vllm-metrics.js';

export interface EmulatedPodOptions {
  pod: PodConfig;
  model: ModelConfig;
  emulator: EmulatorSection;
  profile: EngineProfile;
  tokenizer: Tokenizer;
  template: ChatTemplate;
  vocab: OutputVocab;
  /** Bind the HTTP server here instead of the address's host (e.g. 0.0.0.0 in a container). */
  bindHost?: string;
  log?: (line: string) => void;
}

interface ResolvedModel {
  name: string;
  lora: string | null;
  loraId: number | null;
}

interface Generation {
  chat: boolean;
  tokens: number[];
  sp: SamplingParams;
  model: ResolvedModel;
}

const VERSION = '0.1.0-kinference-emulator';

/**
 * One emulated vLLM pod: the OpenAI-compatible HTTP API, /metrics, /tokenize and /health on the pod's
 * address, and one engine core per data-parallel rank, each with its KV-event publisher (port + rank).
 */
export class EmulatedPod {
  readonly #o: EmulatedPodOptions;
  readonly #server: Server;
  #cores: LiveEngineCore[] = [];
  #publishers: KvEventPublisher[] = [];
  #metrics!: VllmMetrics;
  /** Same for every rank and every restart (same options); kept so a restart never leaves it unknown. */
  #maxModelLen = 0;
  #starts = 0;
  #ready = false;
  #rrStart = 0;
  readonly #created = Math.floor(Date.now() / 1000);

  constructor(o: EmulatedPodOptions) {
    this.#o = o;
    this.#server = createServer((req, res) => {
      this.#handle(req, res).catch((e: unknown) => {
        this.#log(`internal error: ${(e as Error).stack ?? String(e)}`);
        if (!res.headersSent) sendError(res, 500, `internal error: ${(e as Error).message}`);
        else res.destroy();
      });
    });
    this.#server.keepAliveTimeout = 65_000;
  }

  get id(): string {
    return this.#o.pod.id;
  }

  /** host:port actually bound (differs from the config only when it asked for port 0). */
  get address(): string {
    const a = this.#server.address() as AddressInfo | null;
    return a === null ? this.#o.pod.address : `${this.#o.pod.address.split(':')[0]}:${a.port}`;
  }

  get dataParallelSize(): number {
    return Math.max(1, this.#o.pod.data_parallel_size ?? 1);
  }

  /** Engine cores by DP rank (for tests and the demo). */
  get cores(): readonly LiveEngineCore[] {
    return this.#cores;
  }

  async start(): Promise<void> {
    await this.#startCores();
    const [host, port] = splitAddress(this.#o.pod.address);
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(port, this.#o.bindHost ?? host, () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    this.#ready = true;
  }

  /** A restarted vLLM process: new engines (empty cache, new NONE_HASH unless seeded), seq from 0. */
  async restart(): Promise<void> {
    this.#ready = false;
    await this.#stopCores('EngineCore restarted');
    await this.#startCores();
    this.#ready = true;
  }

  /** Graceful stop: open streams end with an error event, idle connections close, then the sockets. */
  async close(): Promise<void> {
    this.#ready = false;
    await this.#stopCores('server shutting down');
    await new Promise<void>((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeIdleConnections();
      setTimeout(() => this.#server.closeAllConnections(), 200).unref();
    });
  }

  // ---------------------------------------------------------------------------------------------------

  async #startCores(): Promise<void> {
    const o = this.#o;
    const e = o.emulator;
    const start = this.#starts++;
    const engines = Array.from({ length: this.dataParallelSize }, (_, rank) => {
      const opts = engineOptionsFor(o.profile, {
        blockSize: o.model.block_size,
        seed: (Math.imul(e.seed, 1_000_003) + hashString32(`${o.pod.id}/${rank}/${start}`)) >>> 0,
        eosTokenId: o.vocab.eosTokenId,
        outputVocab: o.vocab.ids,
        noneHash: e.hash_seed !== undefined ? noneHashFromSeed(e.hash_seed) : randomNoneHash(),
        ...(e.kv_capacity_tokens !== undefined ? { kvCapacityTokens: e.kv_capacity_tokens } : {}),
        ...(e.max_num_batched_tokens !== undefined ? { maxNumBatchedTokens: e.max_num_batched_tokens } : {}),
        ...(e.max_num_seqs !== undefined ? { maxNumSeqs: e.max_num_seqs } : {}),
        longPrefillTokenThreshold: e.long_prefill_token_threshold,
        ...(e.max_model_len !== undefined ? { maxModelLen: e.max_model_len } : {}),
        ...(e.mean_output_tokens !== undefined ? { meanOutputTokens: e.mean_output_tokens } : {}),
      });
      return new Engine(opts);
    });
    const first = engines[0] as Engine;
    this.#maxModelLen = first.maxModelLen;
    const metrics = new VllmMetrics({
      modelName: o.pod.model,
      engineIndexes: engines.map((_, i) => i),
      maxModelLen: first.maxModelLen,
      blockSize: first.blockSize,
      numGpuBlocks: first.numGpuBlocks,
      msToSeconds: (ms) => ms / 1000 / e.time_scale,
      hashAlgo: ENGINE_HASH_ALGO,
    });
    const publishers: KvEventPublisher[] = [];
    try {
      for (let rank = 0; rank < engines.length; rank++) {
        if (o.pod.kv_events === undefined) break;
        const p = new KvEventPublisher({
          endpoint: offsetEndpoint(o.pod.kv_events, rank),
          ...(o.pod.kv_events_replay !== undefined
            ? { replayEndpoint: offsetEndpoint(o.pod.kv_events_replay, rank) }
            : {}),
          topic: o.pod.kv_events_topic ?? '',
          format: e.kv_events_format,
          hashForm: e.kv_events_hash,
          dataParallelRank: rank,
          bufferSteps: e.kv_events_buffer_steps,
          hwm: 100_000,
        });
        publishers.push(p);
        await p.start();
      }
    } catch (err) {
      await Promise.all(publishers.map((p) => p.close()));
      throw err;
    }
    this.#metrics = metrics;
    this.#publishers = publishers;
    this.#cores = engines.map(
      (engine, rank) =>
        new LiveEngineCore({
          engine,
          timeScale: e.time_scale,
          publisher: publishers[rank] ?? null,
          onOutcome: (out) => metrics.record(rank, out),
        }),
    );
  }

  async #stopCores(reason: string): Promise<void> {
    const cores = this.#cores;
    const pubs = this.#publishers;
    this.#cores = [];
    this.#publishers = [];
    for (const c of cores) c.close(reason);
    await Promise.all(pubs.map((p) => p.close()));
  }

  #log(line: string): void {
    this.#o.log?.(`[${this.#o.pod.id}] ${line}`);
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://emulator').pathname;
    const route = `${req.method ?? 'GET'} ${path}`;
    switch (route) {
      case 'GET /health':
        res.writeHead(this.#ready ? 200 : 503, { 'content-length': 0 });
        res.end();
        return;
      case 'GET /metrics':
        res.writeHead(200, { 'content-type': this.#metrics.contentType });
        res.end(await this.#metrics.render());
        return;
      case 'GET /v1/models':
        sendJson(res, 200, this.#models());
        return;
      case 'GET /version':
        sendJson(res, 200, { version: VERSION });
        return;
      case 'GET /emulator/state':
        sendJson(res, 200, this.#state());
        return;
      case 'POST /emulator/restart':
        await this.restart();
        sendJson(res, 200, { restarted: true, starts: this.#starts });
        return;
      case 'POST /reset_prefix_cache': {
        // vLLM answers 200 either way and only logs when requests still hold blocks.
        const ok = this.#cores.map((c) => c.resetPrefixCache());
        if (ok.includes(false)) this.#log('reset_prefix_cache: failed, some blocks are still in use');
        res.writeHead(200, { 'content-length': 0 });
        res.end();
        return;
      }
      case 'POST /tokenize':
      case 'POST /detokenize':
      case 'POST /v1/chat/completions':
      case 'POST /v1/completions':
        break;
      default: {
        const known = [
          '/health',
          '/metrics',
          '/v1/models',
          '/version',
          '/tokenize',
          '/detokenize',
          '/v1/chat/completions',
          '/v1/completions',
          '/reset_prefix_cache',
          '/emulator/state',
          '/emulator/restart',
        ];
        sendJson(res, known.includes(path) ? 405 : 404, {
          detail: known.includes(path) ? 'Method Not Allowed' : 'Not Found',
        });
        return;
      }
    }
    const body = await readJsonBody(req);
    if (!body.ok) return sendError(res, body.status, body.message);
    if (!this.#ready) return sendError(res, 503, 'The engine is restarting');
    if (path === '/tokenize') return this.#tokenize(res, body.json);
    if (path === '/detokenize') return this.#detokenize(res, body.json);
    const model = this.#resolveModel(body.json.model);
    if (model === null)
      return sendError(res, 404, `The model \`${String(body.json.model)}\` does not exist.`, 'model');
    const chat = path === '/v1/chat/completions';
    const sp = parseSamplingParams(body.json, chat);
    if (!sp.ok) return sendError(res, 400, sp.message, sp.param);
    let tokens: number[];
    if (chat) {
      const text = this.#renderChat(res, body.json);
      if (text === null) return;
      tokens = await this.#o.tokenizer.encode(text);
    } else {
      const p = parsePrompt(body.json.prompt);
      if (!p.ok) return sendError(res, 400, p.message, p.param);
      tokens = typeof p.value === 'string' ? await this.#o.tokenizer.encode(p.value) : p.value;
    }
    this.#generate(req, res, { chat, tokens, sp: sp.value, model });
  }

  #resolveModel(requested: unknown): ResolvedModel | null {
    const base = this.#o.pod.model;
    if (requested === undefined || requested === null || requested === base)
      return { name: base, lora: null, loraId: null };
    const i = this.#o.model.lora_adapters?.indexOf(String(requested)) ?? -1;
    return i >= 0 ? { name: String(requested), lora: String(requested), loraId: i + 1 } : null;
  }

  /** Renders a chat body exactly as the chat endpoint does; answers 400 and returns null on failure. */
  #renderChat(res: ServerResponse, body: Json): string | null {
    const parsed = parseChatRequest({ ...body, model: this.#o.pod.model });
    if (!parsed.ok) {
      sendError(res, 400, parsed.detail, 'messages');
      return null;
    }
    try {
      return this.#o.template.render(parsed.request);
    } catch (e) {
      sendError(res, 400, `chat template error: ${(e as Error).message}`, 'messages');
      return null;
    }
  }

  async #tokenize(res: ServerResponse, body: Json): Promise<void> {
    let tokens: number[];
    if (Array.isArray(body.messages)) {
      const text = this.#renderChat(res, body);
      if (text === null) return;
      tokens = await this.#o.tokenizer.encode(text);
    } else {
      if (typeof body.prompt !== 'string') return sendError(res, 400, 'prompt must be a string', 'prompt');
      tokens = await this.#o.tokenizer.encode(body.prompt);
    }
    const strs =
      body.return_token_strs === true
        ? await Promise.all(tokens.map((t) => this.#o.tokenizer.decode([t])))
        : null;
    sendJson(res, 200, { count: tokens.length, max_model_len: this.#maxModelLen, tokens, token_strs: strs });
  }

  async #detokenize(res: ServerResponse, body: Json): Promise<void> {
    const t = body.tokens;
    if (!Array.isArray(t) || !t.every((x) => typeof x === 'number' && Number.isInteger(x) && x >= 0))
      return sendError(res, 400, 'tokens must be a list of token ids', 'tokens');
    sendJson(res, 200, { prompt: await this.#o.tokenizer.decode(t as number[]) });
  }

  #models(): Json {
    const permission = (): Json => ({
      id: `modelperm-${randomUUID().replaceAll('-', '')}`,
      object: 'model_permission',
      created: this.#created,
      allow_create_engine: false,
      allow_sampling: true,
      allow_logprobs: true,
      allow_search_indices: false,
      allow_view: true,
      allow_fine_tuning: false,
      organization: '*',
      group: null,
      is_blocking: false,
    });
    const base = this.#o.pod.model;
    const card = (id: string, root: string, parent: string | null, maxLen: number | null): Json => ({
      id,
      object: 'model',
      created: this.#created,
      owned_by: 'vllm',
      root,
      parent,
      max_model_len: maxLen,
      permission: [permission()],
    });
    return {
      object: 'list',
      data: [
        card(base, base, null, this.#maxModelLen),
        ...(this.#o.model.lora_adapters ?? []).map((l) => card(l, `/loras/${l}`, base, null)),
      ],
    };
  }

  #state(): Json {
    return {
      pod: this.#o.pod.id,
      starts: this.#starts,
      ranks: this.#cores.map((c, rank) => {
        const s = c.engine.snapshot();
        return {
          rank,
          engine_time_ms: c.nowMs(),
          running: s.running.length,
          waiting: s.waiting.length,
          kv_usage: s.kvUsage,
          num_gpu_blocks: s.numGpuBlocks,
          free_blocks: s.numFreeBlocks,
          cached_blocks: [...s.cachedHashes.values()].reduce((a, b) => a + b, 0),
          next_kv_event_seq: Number(this.#publishers[rank]?.nextSeq ?? 0n),
        };
      }),
    };
  }

  /** X-data-parallel-rank pins a rank; otherwise vLLM's least-loaded choice (waiting × 4 + running). */
  #pickCore(req: IncomingMessage): LiveEngineCore | string {
    const h = req.headers['x-data-parallel-rank'];
    if (typeof h === 'string' && h !== '') {
      const r = Number(h);
      const core = Number.isInteger(r) ? this.#cores[r] : undefined;
      return core ?? `X-data-parallel-rank ${h} is out of range (data_parallel_size ${this.#cores.length})`;
    }
    const n = this.#cores.length;
    let best = this.#cores[0] as LiveEngineCore;
    let bestScore = Number.POSITIVE_INFINITY;
    for (let i = 0; i < n; i++) {
      const c = this.#cores[(this.#rrStart + i) % n] as LiveEngineCore;
      if (c.loadScore < bestScore) {
        bestScore = c.loadScore;
        best = c;
      }
    }
    this.#rrStart = (this.#rrStart + 1) % n;
    return best;
  }

  #generate(req: IncomingMessage, res: ServerResponse, g: Generation): void {
    const core = this.#pickCore(req);
    if (typeof core === 'string') return sendError(res, 400, core, 'X-data-parallel-rank');
    const maxLen = core.engine.maxModelLen;
    if (g.tokens.length >= maxLen)
      return sendError(
        res,
        400,
        `This model's maximum context length is ${maxLen} tokens. However, your request has ${g.tokens.length} input tokens. Please reduce the length of the input messages.`,
        'messages',
      );
    const details = this.#o.emulator.prompt_tokens_details;
    const id = `${g.chat ? 'chatcmpl' : 'cmpl'}-${randomUUID().replaceAll('-', '')}`;
    const head: ChunkHead = { id, created: Math.floor(Date.now() / 1000), model: g.model.name };
    const prompt = g.tokens.length;
    const text = this.#o.vocab.text;
    let done = false;
    let completion = 0;
    let cached = 0;
    let out = '';
    // final: the usage chunk or body (prompt_tokens_details when enabled); otherwise a continuous-usage chunk.
    const usage = (final: boolean, nullDetails = false) =>
      usageJson(
        { promptTokens: prompt, completionTokens: completion, cachedTokens: cached },
        final && details,
        nullDetails,
      );
    // Streaming headers go out once, at submit or with the first chunk if the engine emits during submit.
    const startStream = (): void => {
      if (res.headersSent) return;
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
      res.flushHeaders();
    };
    const write = (s: string): void => {
      if (res.writableEnded) return;
      startStream();
      res.write(s);
    };

    const listener: RequestListener = g.sp.stream
      ? {
          onToken: (t: TokenOutput) => {
            cached = t.cachedTokens;
            if (t.first && g.chat)
              write(sse(chatRoleChunk(head, g.sp.continuousUsage ? usage(false) : null)));
            completion += t.tokenIds.length;
            const delta = t.tokenIds.map((x) => text.get(x) ?? '').join('');
            const u = g.sp.continuousUsage ? usage(false) : null;
            write(
              sse(
                g.chat
                  ? chatChunk(head, { content: delta }, t.finishReason, u)
                  : completionChunk(head, delta, t.finishReason, u),
              ),
            );
          },
          onFinish: (f: FinishedRequest) => {
            done = true;
            if (f.reason !== 'abort') {
              if (g.sp.includeUsage) write(sse(usageChunk(head, g.chat, usage(true))));
              write('data: [DONE]\n\n');
            }
            res.end();
          },
          onError: (message: string) => {
            done = true;
            write(sse({ error: { message, type: 'InternalServerError', param: null, code: 500 } }));
            write('data: [DONE]\n\n');
            res.end();
          },
        }
      : {
          onToken: (t: TokenOutput) => {
            cached = t.cachedTokens;
            completion += t.tokenIds.length;
            out += t.tokenIds.map((x) => text.get(x) ?? '').join('');
          },
          onFinish: (f: FinishedRequest) => {
            done = true;
            if (f.reason === 'abort') return void res.end();
            const body = g.chat
              ? chatResponse(head, out, f.reason, usage(true, true))
              : completionResponse(head, out, f.reason, usage(true, true));
            sendJson(res, 200, body);
          },
          onError: (message: string) => {
            done = true;
            sendError(res, 500, message);
          },
        };

    res.on('close', () => {
      if (!done) core.abort(id);
    });
    const r = core.submit(
      {
        id,
        promptTokenIds: g.tokens,
        maxTokens: g.sp.maxTokens ?? maxLen - prompt,
        ignoreEos: g.sp.ignoreEos,
        minTokens: g.sp.minTokens,
        loraName: g.model.lora,
        loraId: g.model.loraId,
        cacheSalt: g.sp.cacheSalt,
        skipPrefixCache: g.sp.skipPrefixCache,
        kvCacheReportMode: g.sp.kvCacheReportMode,
      },
      listener,
    );
    if (!r.ok) {
      done = true;
      return sendError(res, 400, r.message, r.reason === 'context_too_long' ? 'max_tokens' : null);
    }
    // Headers go out at once (as uvicorn does); the first body byte only with the first token.
    if (g.sp.stream && !res.writableEnded) startStream();
  }
}

function splitAddress(address: string): [string, number] {
  const i = address.lastIndexOf(':');
  return [address.slice(0, i), Number(address.slice(i + 1))];
}
