// One emulated vLLM pod: the OpenAI-compatible API, /metrics, /tokenize, /health, engine cores per DP rank.
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { EmulatorSection } from '../../src/config/emulator-section.js';
import type { ModelConfig, PodConfig } from '../../src/config/fleet-config.js';
import { parseChatRequest } from '../../src/core/request.js';
import { TemplateRaisedError } from '../../src/tokenize/chat-template/hf-jinja.js';
import type { ChatTemplate, Tokenizer } from '../../src/tokenize/types.js';
import { ENGINE_HASH_ALGO, noneHashFromSeed, randomNoneHash } from '../engine/block-hash.js';
import { contextLengthMessage, Engine } from '../engine/engine.js';
import { hashString32 } from '../engine/rng.js';
import type { FinishedRequest, TokenOutput } from '../engine/types.js';
import { engineOptionsFor, type EngineProfile } from '../profiles.js';
import { offsetEndpoint } from '../../src/collector/pods.js';
import { readRequestBody, sendError, sendJson, type BodyModel } from './http-util.js';
import { KvEventPublisher } from './kv-publisher.js';
import { LiveEngineCore, type RequestListener } from './live-core.js';
import {
  chatChunk,
  chatResponse,
  chatRoleChunk,
  completionChunk,
  completionResponse,
  sse,
  usageChunk,
  usageJson,
  type ChunkHead,
  type Json,
} from './openai-protocol.js';
import { pyInt, pyJsonDumps } from './py-json.js';
import {
  apiError,
  badRequest,
  ENGINE_DEAD_MESSAGE,
  errorJson,
  internalServerError,
  vllmValidationError,
  type ApiError,
} from './vllm-errors.js';
import { validateGenerationRequest, type CompletionPrompt, type GenerationRequest } from './vllm-request.js';
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
  req: GenerationRequest;
  tokens: number[];
  /** SamplingParams.max_tokens: the request's cap, or what max_model_len leaves. */
  maxTokens: number;
  model: ResolvedModel;
}

const BODY_MODELS: Readonly<Record<string, BodyModel>> = {
  '/v1/chat/completions': 'chat',
  '/v1/completions': 'completion',
  '/tokenize': 'tokenize',
  '/detokenize': 'detokenize',
};

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
      // Whatever escapes a request is answered as vLLM's catch-all handler answers it, never a crash.
      this.#handle(req, res).catch((e: unknown) => {
        this.#log(`internal error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
        if (!res.headersSent && !res.destroyed) sendError(res, internalServerError(e));
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
    // vLLM numbers engines by global DP rank (--data-parallel-start-rank + i): their KV-event ports, batch
    // ranks and metrics labels; X-data-parallel-rank still picks among this server's own, 0 … n−1.
    const dpStart = o.pod.data_parallel_start_rank ?? 0;
    const metrics = new VllmMetrics({
      modelName: o.pod.model,
      engineIndexes: engines.map((_, i) => dpStart + i),
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
          endpoint: offsetEndpoint(o.pod.kv_events, dpStart + rank),
          ...(o.pod.kv_events_replay !== undefined
            ? { replayEndpoint: offsetEndpoint(o.pod.kv_events_replay, dpStart + rank) }
            : {}),
          topic: o.pod.kv_events_topic ?? '',
          format: e.kv_events_format,
          hashForm: e.kv_events_hash,
          dataParallelRank: dpStart + rank,
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
          onOutcome: (out) => metrics.record(dpStart + rank, out),
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
    const body = await readRequestBody(req, BODY_MODELS[path] as BodyModel);
    if (!body.ok) return sendError(res, body.error);
    if (path === '/tokenize' || path === '/detokenize') {
      if (!this.#ready)
        return sendError(res, apiError(503, 'ServiceUnavailableError', 'The engine is restarting'));
      return path === '/tokenize' ? this.#tokenize(res, body.json) : this.#detokenize(res, body.json);
    }
    const chat = path === '/v1/chat/completions';
    const valid = validateGenerationRequest(body.json, chat, body.py);
    if (!valid.ok) return sendError(res, valid.error);
    const r = valid.value;
    const model = this.#resolveModel(r.model);
    if (model === null)
      return sendError(
        res,
        apiError(404, 'NotFoundError', `The model \`${r.model}\` does not exist.`, 'model'),
      );
    // Where vLLM checks for a dead engine; a restarting emulated pod answers 503 instead.
    if (!this.#ready)
      return sendError(res, apiError(503, 'ServiceUnavailableError', 'The engine is restarting'));
    // What the emulator does not serve (vLLM does): several choices, several prompts, prompt embeddings.
    if (r.n !== 1n) return sendError(res, badRequest('the vLLM emulator supports only n=1', 'n'));
    if (r.prompts !== null && r.prompts.length !== 1)
      return sendError(res, badRequest('the vLLM emulator serves one prompt per request', 'prompt'));
    if (!chat && r.prompts === null)
      return sendError(res, badRequest('the vLLM emulator does not support prompt_embeds', 'prompt_embeds'));
    const g = await this.#prepare(r, model);
    if ('status' in g) return sendError(res, g);
    this.#generate(req, res, g);
  }

  /**
   * The prompt's tokens and the output cap, with vLLM's checks in its order: the requested output against
   * max_model_len (TokenizeParams), the rendering, the prompt's length in characters then in tokens (the
   * renderer), then what max_model_len leaves (get_max_tokens) and SamplingParams' own checks.
   */
  async #prepare(r: GenerationRequest, model: ResolvedModel): Promise<Generation | ApiError> {
    const maxLen = this.#maxModelLen;
    // build_tok_params: `max_tokens or 0`.
    const maxOutput = r.maxTokens ?? 0n;
    if (maxOutput > BigInt(maxLen))
      return vllmValidationError(
        `${r.maxTokensParam}=${maxOutput} cannot be greater than max_model_len=max_total_tokens=${maxLen}. ` +
          'Please request fewer output tokens.',
        r.maxTokensParam,
        String(maxOutput),
      );
    const maxInput = maxLen - Number(maxOutput);
    let text: string | null = null;
    let ids: number[] | null = null;
    if (r.chatBody !== null) {
      const rendered = this.#renderChat(r.chatBody);
      if (typeof rendered !== 'string') return rendered;
      text = rendered;
    } else {
      const p = r.prompts?.[0] as CompletionPrompt;
      if ('text' in p) text = p.text;
      else ids = p.ids;
    }
    let tokens: number[];
    if (text !== null) {
      const perToken = this.#o.tokenizer.maxCharsPerToken;
      const chars = [...text].length;
      if (perToken !== undefined && chars > maxInput * perToken)
        return vllmValidationError(
          `This model's maximum context length is ${maxLen} tokens. However, you requested ${maxOutput} ` +
            `output tokens and your prompt contains ${chars} characters (more than ${maxInput * perToken} ` +
            `characters, which is the upper bound for ${maxInput} input tokens). Please reduce the length of ` +
            'the input prompt or the number of requested output tokens.',
          'input_text',
          String(chars),
        );
      tokens = await this.#o.tokenizer.encode(text);
    } else tokens = ids as number[];
    if (tokens.length > maxInput) {
      // vLLM tokenizes text only up to max_input + 1 tokens, so it knows no more than "at least" that many.
      const count = text !== null ? maxInput + 1 : tokens.length;
      return vllmValidationError(
        contextLengthMessage(maxLen, maxOutput, count, count === maxInput + 1),
        'input_tokens',
        String(count),
      );
    }
    // get_max_tokens (a negative max_tokens lets a prompt past max_model_len through the renderer).
    if (tokens.length > maxLen)
      return badRequest(
        `Input length (${tokens.length}) exceeds model's maximum context length (${maxLen}).`,
      );
    const left = BigInt(maxLen - tokens.length);
    const maxTokens = r.maxTokens !== null && r.maxTokens < left ? r.maxTokens : left;
    // SamplingParams._verify_args.
    if (maxTokens < 1n)
      return vllmValidationError(
        `max_tokens must be at least 1, got ${maxTokens}.`,
        'max_tokens',
        String(maxTokens),
      );
    if (r.minTokens < 0n)
      return badRequest(`min_tokens must be greater than or equal to 0, got ${r.minTokens}.`);
    if (r.minTokens > maxTokens)
      return badRequest(
        `min_tokens must be less than or equal to max_tokens=${maxTokens}, got ${r.minTokens}.`,
      );
    return { req: r, tokens, maxTokens: Number(maxTokens), model };
  }

  /** null and "" are the base model (vLLM's _is_model_supported); else the base name or a LoRA adapter. */
  #resolveModel(requested: string | null): ResolvedModel | null {
    const base = this.#o.pod.model;
    if (requested === null || requested === '' || requested === base)
      return { name: base, lora: null, loraId: null };
    const i = this.#o.model.lora_adapters?.indexOf(requested) ?? -1;
    return i >= 0 ? { name: requested, lora: requested, loraId: i + 1 } : null;
  }

  /**
   * Renders a chat body as the chat endpoint does: the prompt text, or the error vLLM answers. A template
   * failure is a 400 BadRequestError with the template's own text and no param (vLLM wraps it in a
   * ValueError). A body the chat parser cannot read (a message pydantic would refuse) gets vLLM's status and
   * type for a validation failure, with the parser's words.
   */
  #renderChat(body: Json): string | ApiError {
    const parsed = parseChatRequest({ ...body, model: this.#o.pod.model }, { allowEmptyMessages: true });
    if (!parsed.ok) {
      const field = /^`?(messages|tools)\b/.exec(parsed.detail)?.[1];
      return apiError(400, 'Bad Request', parsed.detail, field === undefined ? 'body' : `body.${field}`);
    }
    try {
      return this.#o.template.render(parsed.request);
    } catch (e) {
      return badRequest(e instanceof TemplateRaisedError ? e.raised : (e as Error).message);
    }
  }

  async #tokenize(res: ServerResponse, body: Json): Promise<void> {
    let tokens: number[];
    if (Array.isArray(body.messages)) {
      const text = this.#renderChat(body);
      if (typeof text !== 'string') return sendError(res, text);
      tokens = await this.#o.tokenizer.encode(text);
    } else {
      if (typeof body.prompt !== 'string')
        return sendError(res, badRequest('prompt must be a string', 'prompt'));
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
      return sendError(res, badRequest('tokens must be a list of token ids', 'tokens'));
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

  /**
   * X-data-parallel-rank pins a rank (read as Python's int(); a value int() refuses is ignored, as vLLM's
   * _get_data_parallel_rank does); otherwise vLLM's least-loaded choice (waiting × 4 + running). A rank out of
   * range is InputProcessor's ValueError.
   */
  #pickCore(req: IncomingMessage): LiveEngineCore | ApiError {
    const h = req.headers['x-data-parallel-rank'];
    const rank = typeof h === 'string' ? pyInt(h) : null;
    const n = this.#cores.length;
    if (rank !== null) {
      if (rank < 0n || rank >= BigInt(n))
        return badRequest(`data_parallel_rank ${rank} is out of range [0, ${n}).`);
      return this.#cores[Number(rank)] as LiveEngineCore;
    }
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
    const sp = g.req;
    const chat = sp.chat;
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
    /**
     * A failure once the request is handed to the engine. vLLM has sent a streaming response's 200 by then,
     * so the error goes out as a chunk, json.dumps of the ErrorResponse, before [DONE]; a non-streaming
     * request gets it as the response.
     */
    const fail = (e: ApiError): void => {
      if (!sp.stream) {
        if (!res.headersSent) sendError(res, e);
        else res.end();
        return;
      }
      write(`data: ${pyJsonDumps(errorJson(e))}\n\n`);
      write('data: [DONE]\n\n');
      res.end();
    };
    // The engine died under the request (EngineDeadError): a 500 with vLLM's message.
    const engineDead = apiError(500, 'InternalServerError', ENGINE_DEAD_MESSAGE);
    const core = this.#pickCore(req);
    if (!(core instanceof LiveEngineCore)) return fail(core);
    const details = this.#o.emulator.prompt_tokens_details;
    const id = `${chat ? 'chatcmpl' : 'cmpl'}-${randomUUID().replaceAll('-', '')}`;
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

    const listener: RequestListener = sp.stream
      ? {
          onToken: (t: TokenOutput) => {
            cached = t.cachedTokens;
            if (t.first && chat) write(sse(chatRoleChunk(head, sp.continuousUsage ? usage(false) : null)));
            completion += t.tokenIds.length;
            const delta = t.tokenIds.map((x) => text.get(x) ?? '').join('');
            const u = sp.continuousUsage ? usage(false) : null;
            write(
              sse(
                chat
                  ? chatChunk(head, { content: delta }, t.finishReason, u)
                  : completionChunk(head, delta, t.finishReason, u),
              ),
            );
          },
          onFinish: (f: FinishedRequest) => {
            done = true;
            if (f.reason !== 'abort') {
              if (sp.includeUsage) write(sse(usageChunk(head, chat, usage(true))));
              write('data: [DONE]\n\n');
            }
            res.end();
          },
          onError: () => {
            done = true;
            fail(engineDead);
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
            const body = chat
              ? chatResponse(head, out, f.reason, usage(true, true))
              : completionResponse(head, out, f.reason, usage(true, true));
            sendJson(res, 200, body);
          },
          onError: () => {
            done = true;
            fail(engineDead);
          },
        };

    res.on('close', () => {
      if (!done) core.abort(id);
    });
    const r = core.submit(
      {
        id,
        promptTokenIds: g.tokens,
        maxTokens: g.maxTokens,
        ignoreEos: sp.ignoreEos,
        minTokens: Number(sp.minTokens),
        loraName: g.model.lora,
        loraId: g.model.loraId,
        cacheSalt: sp.cacheSalt,
        skipPrefixCache: sp.skipPrefixCache,
        kvCacheReportMode: sp.kvCacheReportMode,
      },
      listener,
    );
    if (!r.ok) {
      done = true;
      // InputProcessor's ValueErrors (400), or the engine gone (AsyncLLM.add_request's EngineDeadError).
      return fail(r.reason === 'engine_dead' ? engineDead : badRequest(r.message));
    }
    // Headers go out at once (as uvicorn does); the first body byte only with the first token.
    if (sp.stream && !res.writableEnded) startStream();
  }
}

function splitAddress(address: string): [string, number] {
  const i = address.lastIndexOf(':');
  return [address.slice(0, i), Number(address.slice(i + 1))];
}
