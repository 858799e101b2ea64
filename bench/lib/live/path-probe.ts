// Measures each route's fixed latency around the engine on the running stack, for the DES.
import { idleUncachedTtftMs } from '../des/idle-ttft.js';
import type { PodSpec } from '../des/pod.js';
import { Rng } from '../rng.js';
import type { ModelSetup } from '../setup.js';
import { streamChat } from './http-client.js';

/** A route's fixed latency around the engine, as the DES models it (virtual ms). */
export interface PathFit {
  /** Client → engine, fixed part. */
  requestOverheadMs: number;
  /** Client → engine, per prompt token. */
  requestOverheadMsPerToken: number;
  /** Client → engine, per prompt token the gateway's plugin tokenized (not in its segment cache). */
  requestOverheadMsPerTokenizedToken: number;
  /**
   * Measured overhead (live TTFT − the engine's idle TTFT) per probe size, medians; `warmOverheadMs` is the
   * same prompt sent again after the pods' prefix caches were reset (only the route's own caches warm).
   */
  samples: { promptTokens: number; overheadMs: number; warmOverheadMs?: number }[];
}

/** Where to probe: a pod directly, or the gateway (optionally on a route path). */
export interface ProbeTarget {
  host: string;
  port: number;
  path?: string;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[(s.length - 1) >> 1]!;
};

/**
 * Measures what each route costs beyond the engine on the running stack: idle, uncached requests of two
 * sizes, one at a time, the routes interleaved so that they see the same machine; live TTFT (× time scale)
 * minus the engine's own TTFT for that prompt is the path, fitted as fixed + per-token. `responseOverheadMs`
 * is the DES's engine → client share, taken out of the fixed part so the sum matches.
 * For the `tokenizing` routes (through the plugin), each prompt is sent again after `resetPrefixCaches`:
 * the pods compute it all again but the plugin's segment cache serves it, so the difference is what the
 * plugin's own tokenizing costs per token, and the warm probes fit the rest.
 */
export async function probePaths<K extends string>(o: {
  targets: Record<K, ProbeTarget>;
  pod: PodSpec;
  model: ModelSetup;
  timeScale: number;
  responseOverheadMs: number;
  sizes?: [number, number];
  repeats?: number;
  tokenizing?: { routes: NoInfer<K>[]; resetPrefixCaches: () => Promise<void> };
}): Promise<Record<K, PathFit>> {
  const sizes = o.sizes ?? [256, 8192];
  const repeats = o.repeats ?? 7;
  const rng = new Rng(7);
  const keys = Object.keys(o.targets) as K[];
  const tokenizing = new Set(o.tokenizing?.routes ?? []);
  const over = new Map<string, number[]>();
  const tokens = new Map<string, number>();
  /** Sends one probe; returns its overhead over the engine's idle uncached TTFT. */
  const probe = async (k: K, body: string): Promise<{ promptTokens: number; overheadMs: number }> => {
    const target = o.targets[k];
    const t = await streamChat(target.host, target.port, body, target.path);
    if (!t.ok || t.firstTokenMs === null)
      throw new Error(`path probe ${k}: HTTP ${t.status} from ${target.host}:${target.port}`);
    if (t.cachedTokens > 0) throw new Error(`path probe ${k}: a probe prompt hit the cache`);
    const overheadMs = (t.firstTokenMs - t.startMs) * o.timeScale - idleUncachedTtftMs(o.pod, t.promptTokens);
    return { promptTokens: t.promptTokens, overheadMs };
  };
  const note = (at: string, r: { promptTokens: number; overheadMs: number }): void => {
    tokens.set(at, r.promptTokens);
    over.set(at, [...(over.get(at) ?? []), r.overheadMs]);
  };
  for (let i = 0; i < repeats; i++) {
    const again: [K, number, string][] = [];
    for (const size of sizes)
      for (const k of keys) {
        const text = await o.model.synth.text(`probe ${k} ${size} ${i} `, size, rng);
        const body = JSON.stringify({
          model: o.model.model,
          messages: [{ role: 'user', content: text }],
          max_tokens: 2,
          ignore_eos: true,
          stream: true,
          stream_options: { include_usage: true },
        });
        note(`${k}/${size}`, await probe(k, body));
        if (tokenizing.has(k)) again.push([k, size, body]);
      }
    if (again.length === 0) continue;
    await o.tokenizing!.resetPrefixCaches();
    for (const [k, size, body] of again) note(`${k}/${size}/warm`, await probe(k, body));
  }
  const out = {} as Record<K, PathFit>;
  for (const k of keys) {
    const samples = sizes.map((size) => {
      const warm = over.get(`${k}/${size}/warm`);
      return {
        promptTokens: tokens.get(`${k}/${size}`)!,
        overheadMs: median(over.get(`${k}/${size}`)!),
        ...(warm ? { warmOverheadMs: median(warm) } : {}),
      };
    }) as [PathFit['samples'][0], PathFit['samples'][0]];
    // Without the plugin's tokenizing (warm), and what it adds per token (cold − warm, on the long probe).
    const [a, b] = samples.map((x) => ({ n: x.promptTokens, ms: x.warmOverheadMs ?? x.overheadMs })) as [
      { n: number; ms: number },
      { n: number; ms: number },
    ];
    const perToken = Math.max(0, (b.ms - a.ms) / (b.n - a.n));
    const long = samples[1];
    const perTokenized =
      long.warmOverheadMs === undefined
        ? 0
        : Math.max(0, (long.overheadMs - long.warmOverheadMs) / long.promptTokens);
    out[k] = {
      requestOverheadMs: Math.max(0, a.ms - perToken * a.n - o.responseOverheadMs),
      requestOverheadMsPerToken: perToken,
      requestOverheadMsPerTokenizedToken: perTokenized,
      samples,
    };
  }
  return out;
}
