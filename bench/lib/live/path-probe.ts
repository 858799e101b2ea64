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
  /** Measured overhead (live TTFT − the engine's idle TTFT) per probe size, medians. */
  samples: { promptTokens: number; overheadMs: number }[];
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
 */
export async function probePaths<K extends string>(o: {
  targets: Record<K, ProbeTarget>;
  pod: PodSpec;
  model: ModelSetup;
  timeScale: number;
  responseOverheadMs: number;
  sizes?: [number, number];
  repeats?: number;
}): Promise<Record<K, PathFit>> {
  const sizes = o.sizes ?? [256, 8192];
  const repeats = o.repeats ?? 7;
  const rng = new Rng(7);
  const keys = Object.keys(o.targets) as K[];
  const over = new Map<string, number[]>();
  const tokens = new Map<string, number>();
  for (let i = 0; i < repeats; i++)
    for (const size of sizes)
      for (const k of keys) {
        const target = o.targets[k];
        const text = await o.model.synth.text(`probe ${k} ${size} ${i} `, size, rng);
        const body = JSON.stringify({
          model: o.model.model,
          messages: [{ role: 'user', content: text }],
          max_tokens: 2,
          ignore_eos: true,
          stream: true,
          stream_options: { include_usage: true },
        });
        const t = await streamChat(target.host, target.port, body, target.path);
        if (!t.ok || t.firstTokenMs === null)
          throw new Error(`path probe ${k}: HTTP ${t.status} from ${target.host}:${target.port}`);
        if (t.cachedTokens > 0) throw new Error(`path probe ${k}: a probe prompt hit the cache`);
        const at = `${k}/${size}`;
        tokens.set(at, t.promptTokens);
        over.set(at, [
          ...(over.get(at) ?? []),
          (t.firstTokenMs - t.startMs) * o.timeScale - idleUncachedTtftMs(o.pod, t.promptTokens),
        ]);
      }
  const out = {} as Record<K, PathFit>;
  for (const k of keys) {
    const [a, b] = sizes.map((size) => ({
      promptTokens: tokens.get(`${k}/${size}`)!,
      overheadMs: median(over.get(`${k}/${size}`)!),
    })) as [PathFit['samples'][0], PathFit['samples'][0]];
    const perToken = Math.max(0, (b.overheadMs - a.overheadMs) / (b.promptTokens - a.promptTokens));
    out[k] = {
      requestOverheadMs: Math.max(0, a.overheadMs - perToken * a.promptTokens - o.responseOverheadMs),
      requestOverheadMsPerToken: perToken,
      samples: [a, b],
    };
  }
  return out;
}
