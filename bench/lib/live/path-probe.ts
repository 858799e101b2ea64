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

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[(s.length - 1) >> 1]!;
};

/**
 * Measures what a route costs beyond the engine on the running stack: idle, uncached requests of two
 * sizes, one at a time; live TTFT (× time scale) minus the engine's own TTFT for that prompt is the path,
 * fitted as fixed + per-token. `responseOverheadMs` is the DES's engine → client share, taken out of the
 * fixed part so the sum matches.
 */
export async function probePath(o: {
  target: { host: string; port: number };
  path?: string;
  pod: PodSpec;
  model: ModelSetup;
  timeScale: number;
  responseOverheadMs: number;
  label: string;
  sizes?: [number, number];
  repeats?: number;
}): Promise<PathFit> {
  const sizes = o.sizes ?? [256, 8192];
  const repeats = o.repeats ?? 5;
  const rng = new Rng(7);
  const samples: PathFit['samples'] = [];
  for (const size of sizes) {
    const over: number[] = [];
    let promptTokens = 0;
    for (let i = 0; i < repeats; i++) {
      const text = await o.model.synth.text(`probe ${o.label} ${size} ${i} `, size, rng);
      const body = JSON.stringify({
        model: o.model.model,
        messages: [{ role: 'user', content: text }],
        max_tokens: 2,
        ignore_eos: true,
        stream: true,
        stream_options: { include_usage: true },
      });
      const t = await streamChat(o.target.host, o.target.port, body, o.path);
      if (!t.ok || t.firstTokenMs === null)
        throw new Error(`path probe ${o.label}: HTTP ${t.status} from ${o.target.host}:${o.target.port}`);
      if (t.cachedTokens > 0) throw new Error(`path probe ${o.label}: a probe prompt hit the cache`);
      promptTokens = t.promptTokens;
      over.push((t.firstTokenMs - t.startMs) * o.timeScale - idleUncachedTtftMs(o.pod, t.promptTokens));
    }
    samples.push({ promptTokens, overheadMs: median(over) });
  }
  const [a, b] = samples as [PathFit['samples'][0], PathFit['samples'][0]];
  const perToken = Math.max(0, (b.overheadMs - a.overheadMs) / (b.promptTokens - a.promptTokens));
  return {
    requestOverheadMs: Math.max(0, a.overheadMs - perToken * a.promptTokens - o.responseOverheadMs),
    requestOverheadMsPerToken: perToken,
    samples,
  };
}
