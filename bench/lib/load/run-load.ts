// bench:load's runs: the SLO measured on an idle fleet, then trials with fresh prompts and connections.
import { setMaxListeners } from 'node:events';
import { Agent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { Rng } from '../rng.js';
import { meanPromptTokens } from '../slo.js';
import type { Slo } from '../stats/goodput.js';
import { percentile } from '../stats/percentile.js';
import type { Profile, RequestRecord } from '../types.js';
import { WorkloadFactory } from '../workload/workloads.js';
import type { TextSynth } from '../workload/synth.js';
import { driveLoad, type LoadRunResult } from '../live/drive-load.js';
import { streamChat, type StreamOptions, type StreamTiming } from '../live/http-client.js';
import type { LoadOptions } from './options.js';

export interface LoadRun extends LoadRunResult {
  trial: number;
  /** Failed requests by their error (HTTP status and body start, socket error, timeout). */
  errors: Record<string, number>;
  /** Keys of the requests answered 429 (the gateway shedding load): not failures. */
  rejected: string[];
  /** Set when the run stopped early (fail-fast or interrupted), with why. */
  aborted: string | null;
}

export interface LoadHooks {
  /** A request's stream ended (every request, in any run). */
  onSettled?(rec: RequestRecord, t: StreamTiming): void;
  /** A run starts (fresh connection pools and prompts). */
  onTrial?(trial: number): void;
  /** Aborting it stops sending; the runs return what they have. */
  signal?: AbortSignal;
}

export class LoadFailure extends Error {}

function target(o: LoadOptions): { host: string; port: number; path: string; base: StreamOptions } {
  const tls = o.url.protocol === 'https:';
  const auth: Record<string, string> = o.url.username
    ? {
        authorization: `Basic ${Buffer.from(`${decodeURIComponent(o.url.username)}:${decodeURIComponent(o.url.password)}`).toString('base64')}`,
      }
    : {};
  return {
    host: o.url.hostname.replace(/^\[|\]$/g, ''),
    port: Number(o.url.port) || (tls ? 443 : 80),
    path: o.url.pathname + o.url.search,
    base: { tls, headers: { ...auth, ...o.headers }, idleTimeoutMs: o.idleTimeoutMs },
  };
}

/** Connections live per client worker and close when idle for keepAliveMs, as GuideLLM's httpx pools. */
function workerPools(o: LoadOptions, n: number): (Agent | HttpsAgent)[] {
  const opts = { keepAlive: true, timeout: o.keepAliveMs };
  return Array.from({ length: n }, () =>
    o.url.protocol === 'https:' ? new HttpsAgent(opts) : new Agent(opts),
  );
}

/**
 * The study's TTFT bound: the idle, uncached TTFT of the workload's mean prompt, plus padding. Three
 * sequential requests with fresh prompts; the median counts. Run it on an idle fleet (or pass --ttft-slo-ms).
 */
export async function measureSlo(o: LoadOptions, synth: TextSynth): Promise<Slo> {
  if (o.ttftSloMs !== null) return { ttftMs: o.ttftSloMs, itlMs: o.itlSloMs, basis: 'given (--ttft-slo-ms)' };
  const tokens = meanPromptTokens(o.shapes, o.workload);
  const t = target(o);
  const rng = new Rng(o.seed);
  const ttfts: number[] = [];
  for (let i = 0; i < 3; i++) {
    const text = await synth.text(`${o.salt}slo${i}`, tokens, rng);
    const body = JSON.stringify({
      model: o.model,
      messages: [{ role: 'user', content: text }],
      max_tokens: 2,
      ignore_eos: true,
      stream: true,
      stream_options: { include_usage: true },
    });
    const r = await streamChat(t.host, t.port, body, t.path, t.base);
    if (!r.ok || r.firstTokenMs === null)
      throw new LoadFailure(`measuring the idle TTFT for the SLO: ${r.error ?? `HTTP ${r.status}`}`);
    ttfts.push(r.firstTokenMs - r.startMs);
  }
  const idle = percentile(ttfts, 0.5);
  return {
    ttftMs: Math.round(idle * (1 + o.ttftPadding)),
    itlMs: o.itlSloMs,
    basis: `measured idle uncached TTFT of a ${tokens.toLocaleString('en')}-token prompt (${(idle / 1000).toFixed(2)} s, median of 3) + ${Math.round(o.ttftPadding * 100)}%`,
  };
}

/**
 * Runs `o.trials` runs of `profile` against the endpoint, each with fresh prompts and connections.
 * `salts[t]` leads trial t's prompts: one per run, so no run hits the cache an earlier one left.
 */
export async function runLoad(
  o: LoadOptions,
  profile: Profile,
  salts: readonly string[],
  synth: TextSynth,
  hooks: LoadHooks = {},
): Promise<LoadRun[]> {
  const t = target(o);
  const runs: LoadRun[] = [];
  for (let trial = 0; trial < o.trials && !hooks.signal?.aborted; trial++) {
    hooks.onTrial?.(trial);
    const pools = workerPools(o, profile.clientWorkers ?? 1);
    const errors: Record<string, number> = {};
    const rejected: string[] = [];
    const stop = new AbortController();
    setMaxListeners(0, stop.signal); // each client worker's sleep listens to it
    const onOuterAbort = (): void => stop.abort(hooks.signal?.reason);
    hooks.signal?.addEventListener('abort', onOuterAbort, { once: true });
    let succeeded = 0;
    let failedInARow = 0;
    try {
      const result = await driveLoad({
        profile,
        factory: new WorkloadFactory(o.workload, o.shapes, synth, o.seed, trial, salts[trial]!),
        model: o.model,
        seed: o.seed,
        trial,
        timeScale: 1,
        signal: stop.signal,
        cancelAtEnd: true,
        send: ({ worker, body, signal }) =>
          streamChat(t.host, t.port, body, t.path, { ...t.base, agent: pools[worker], signal }),
        onSettled: (rec, r) => {
          if (rec.status === 'incomplete') {
            // Still running when the run ended (cancelled then): neither a success nor a failure.
          } else if (r.ok) {
            succeeded++;
            failedInARow = 0;
          } else if (r.status === 429) rejected.push(rec.key);
          else {
            const why = r.error ?? `HTTP ${r.status}`;
            errors[why] = (errors[why] ?? 0) + 1;
            failedInARow++;
            if (succeeded === 0 && failedInARow >= o.failFast && !stop.signal.aborted)
              stop.abort(`the first ${failedInARow} requests failed: ${why}`);
          }
          hooks.onSettled?.(rec, r);
        },
      });
      runs.push({
        trial,
        ...result,
        errors,
        rejected,
        aborted: stop.signal.aborted ? String(stop.signal.reason ?? 'aborted') : null,
      });
    } finally {
      hooks.signal?.removeEventListener('abort', onOuterAbort);
      for (const p of pools) p.destroy();
    }
    if (succeeded === 0 && stop.signal.aborted && !hooks.signal?.aborted)
      throw new LoadFailure(String(stop.signal.reason));
  }
  return runs;
}
