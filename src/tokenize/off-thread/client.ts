// The process's one tokenizer worker: started on first use, answers matched to calls, restarted if it dies.
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { KinferenceError, type ErrorCode } from '../../core/errors.js';
import type { LoadedInfo, TokenizerSource, WorkerRequest, WorkerResponse } from './protocol.js';

/**
 * The bundled plugin carries the worker's own bundle as text (scripts/bundle-plugin.mjs defines it): Kong
 * deployments copy the one plugin file, so the worker cannot be a file beside it.
 */
declare const __KINFERENCE_TOKENIZE_WORKER__: string | undefined;

type Call = WorkerRequest extends infer R ? (R extends WorkerRequest ? Omit<R, 'id'> : never) : never;

interface Running {
  worker: Worker;
  pending: Map<number, { resolve: (v: unknown) => void; reject: (e: unknown) => void }>;
  /** Specs loaded in this worker (a restarted worker loads them again before serving them). */
  loads: Map<string, Promise<LoadedInfo>>;
}

let running: Running | null = null;
let nextId = 1;

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

function start(): Running {
  const worker = spawn();
  const r: Running = { worker, pending: new Map(), loads: new Map() };
  // The worker keeps the process alive only while a call waits on it.
  worker.unref();
  worker.on('message', (msg: WorkerResponse) => {
    const p = r.pending.get(msg.id);
    if (!p) return;
    r.pending.delete(msg.id);
    if (r.pending.size === 0) worker.unref();
    if (msg.ok) p.resolve(msg.value);
    else
      p.reject(
        msg.error.code
          ? new KinferenceError(msg.error.code as ErrorCode, msg.error.message)
          : new Error(msg.error.message),
      );
  });
  const fail = (e: Error): void => {
    if (running === r) running = null;
    for (const p of r.pending.values()) p.reject(e);
    r.pending.clear();
  };
  worker.on('error', (e) => fail(new Error(`tokenizer worker failed: ${e.message}`, { cause: e })));
  worker.on('exit', (code) => fail(new Error(`tokenizer worker exited (code ${code})`)));
  return r;
}

function send<T>(r: Running, call: Call): Promise<T> {
  const id = nextId++;
  return new Promise<T>((resolve, reject) => {
    r.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
    if (r.pending.size === 1) r.worker.ref();
    r.worker.postMessage({ ...call, id });
  });
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
    load = send<LoadedInfo>(r, { op: 'load', spec, source });
    // A failed load is not kept: the caller's retry policy decides when to try again.
    load.catch(() => r.loads.delete(spec));
    r.loads.set(spec, load);
  }
  return load;
}

/** Runs an encode or decode on the worker's native encoder, loading the tokenizer there first if needed. */
export async function callWorker<T>(
  source: TokenizerSource,
  call: Exclude<Call, { op: 'load' }>,
): Promise<T> {
  const r = (running ??= start());
  await loadIn(r, call.spec, source);
  if (running !== r) throw new Error('tokenizer worker exited while loading');
  return send<T>(r, call);
}

/** Stops the worker (specs); the next call starts a new one. */
export async function stopTokenizerWorker(): Promise<void> {
  const r = running;
  running = null;
  if (r) await r.worker.terminate();
}
