// Worker threads of the plugin: the tokenizer-load worker, and the handles the decision pool is made of.
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { KinferenceError, type ErrorCode } from '../../core/errors.js';
import type { LoadedInfo, TokenizerSource, WorkerRequest, WorkerResponse } from './protocol.js';

/**
 * The bundled plugin carries the worker's own bundle as text (scripts/bundle-plugin.mjs defines it): Kong
 * deployments copy the one plugin file, so the worker cannot be a file beside it.
 */
declare const __KINFERENCE_TOKENIZE_WORKER__: string | undefined;

export type Call = WorkerRequest extends infer R ? (R extends WorkerRequest ? Omit<R, 'id'> : never) : never;

function spawn(): Worker {
  if (typeof __KINFERENCE_TOKENIZE_WORKER__ === 'string')
    return new Worker(__KINFERENCE_TOKENIZE_WORKER__, {
      eval: true,
      // The worker's bundle resolves its runtime packages (tiktoken, tokenizers) from the plugin file.
      workerData: { moduleFile: fileURLToPath(import.meta.url) },
    });
  const url = import.meta.url;
  // From source (specs, tsx): the worker is TypeScript too; Node 20 does not pass `--import tsx` to workers.
  if (url.endsWith('.ts'))
    return new Worker(
      `import('tsx/esm/api').then(({ register }) => { register(); return import(${JSON.stringify(new URL('./worker.ts', url).href)}); })`,
      { eval: true },
    );
  return new Worker(new URL('./worker.js', url));
}

let nextId = 1;

/**
 * One worker thread and its calls in flight, answered by id. It keeps the process alive only while a call
 * waits on it. When it exits or fails, every call in flight is rejected and `onGone` runs once (its owner
 * starts another).
 */
export class WorkerHandle {
  readonly worker: Worker;
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: unknown) => void }>();
  #gone = false;

  constructor(onGone: (h: WorkerHandle, why: Error) => void = () => undefined) {
    this.worker = spawn();
    this.worker.unref();
    this.worker.on('message', (msg: WorkerResponse) => {
      const p = this.#pending.get(msg.id);
      if (!p) return;
      this.#pending.delete(msg.id);
      if (this.#pending.size === 0) this.worker.unref();
      if (msg.ok) p.resolve(msg.value);
      else
        p.reject(
          msg.error.code
            ? new KinferenceError(msg.error.code as ErrorCode, msg.error.message)
            : new Error(msg.error.message),
        );
    });
    const fail = (e: Error): void => {
      if (this.#gone) return;
      this.#gone = true;
      for (const p of this.#pending.values()) p.reject(e);
      this.#pending.clear();
      onGone(this, e);
    };
    this.worker.on('error', (e) => fail(new Error(`worker failed: ${e.message}`, { cause: e })));
    this.worker.on('exit', (code) => fail(new Error(`worker exited (code ${code})`)));
  }

  /** Calls waiting on this worker. */
  get inFlight(): number {
    return this.#pending.size;
  }

  /** False once it exited or failed. */
  get alive(): boolean {
    return !this.#gone;
  }

  send<T>(call: Call, transfer: ArrayBuffer[] = []): Promise<T> {
    if (this.#gone) return Promise.reject(new Error('worker exited'));
    const id = nextId++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      if (this.#pending.size === 1) this.worker.ref();
      this.worker.postMessage({ ...call, id }, transfer);
    });
  }

  /** Stops the thread (a hung one too): its calls are rejected, `onGone` runs. */
  terminate(): Promise<number> {
    return this.worker.terminate();
  }
}

interface Running {
  handle: WorkerHandle;
  /** Specs loaded in this worker (a restarted worker loads them again before serving them). */
  loads: Map<string, Promise<LoadedInfo>>;
}

/** The process's one tokenizer-load worker: started on first use, restarted if it dies. */
let running: Running | null = null;

function start(): Running {
  const r: Running = {
    handle: new WorkerHandle(() => {
      if (running === r) running = null;
    }),
    loads: new Map(),
  };
  return r;
}

/** Loads a tokenizer in the worker (once per worker): what the caller's thread needs to serve it. */
export function loadInWorker(spec: string, source: TokenizerSource): Promise<LoadedInfo> {
  let r: Running;
  try {
    r = running ??= start();
  } catch (e) {
    return Promise.reject(e instanceof Error ? e : new Error(String(e)));
  }
  return loadIn(r, spec, source);
}

function loadIn(r: Running, spec: string, source: TokenizerSource): Promise<LoadedInfo> {
  let load = r.loads.get(spec);
  if (!load) {
    load = r.handle.send<LoadedInfo>({ op: 'load', spec, source });
    // A failed load is not kept: the caller's retry policy decides when to try again.
    load.catch(() => r.loads.delete(spec));
    r.loads.set(spec, load);
  }
  return load;
}

/** Runs an encode or decode on the worker's native encoder, loading the tokenizer there first if needed. */
export async function callWorker<T>(
  source: TokenizerSource,
  call: Extract<Call, { op: 'encodeOrdinary' | 'encode' | 'decode' }>,
): Promise<T> {
  const r = (running ??= start());
  await loadIn(r, call.spec, source);
  if (running !== r) throw new Error('tokenizer worker exited while loading');
  return r.handle.send<T>(call);
}

/** Stops the worker (specs); the next call starts a new one. */
export async function stopTokenizerWorker(): Promise<void> {
  const r = running;
  running = null;
  if (r) await r.handle.terminate();
}
