import { unpack } from 'msgpackr';
import parsePrometheusTextFormat, { type PromFamily } from 'parse-prometheus-text-format';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Subscriber } from 'zeromq';
import { waitFor } from '../../helpers/ports.js';
import { MODEL, postJson, startTestFleet, type TestFleet } from './emulator-fleet.js';

interface Scrape {
  fams: Map<string, PromFamily>;
  text: string;
}

async function scrape(base: string): Promise<Scrape> {
  const res = await fetch(`${base}/metrics`);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  return { fams: new Map(parsePrometheusTextFormat(text).map((f) => [f.name, f])), text };
}

/**
 * A histogram's `_count` or `_sum` sample with these labels, read from the text: the parser folds labelled
 * histograms into one (it keeps only the le buckets).
 */
function histogramSample(
  s: Scrape,
  name: string,
  suffix: 'count' | 'sum',
  labels: Record<string, string>,
): number {
  for (const line of s.text.split('\n')) {
    const m = /^(\S+)_(count|sum)\{([^}]*)\} (\S+)$/.exec(line);
    if (!m || m[1] !== name || m[2] !== suffix) continue;
    const ls = Object.fromEntries(
      [...(m[3] as string).matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]),
    );
    if (Object.entries(labels).every(([k, v]) => ls[k] === v)) return Number(m[4]);
  }
  throw new Error(`no ${name}_${suffix} sample with ${JSON.stringify(labels)}`);
}

/** A counter's or gauge's value; a histogram's count. */
function value(s: Scrape, name: string, labels: Record<string, string> = {}): number {
  const fam = s.fams.get(name);
  if (!fam) throw new Error(`no metric ${name}`);
  if (fam.type === 'HISTOGRAM') return histogramSample(s, name, 'count', labels);
  const m = fam.metrics.find((x) => Object.entries(labels).every(([k, v]) => x.labels?.[k] === v));
  if (!m) throw new Error(`no ${name} sample with ${JSON.stringify(labels)}`);
  return Number(m.value);
}

// vLLM's bucket lists (vllm/v1/metrics/loggers.py).
const TTFT = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640,
  2560,
];
const LATENCY = [
  0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680,
];
const TPOT = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
const ITER = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384];

describe('emulated vLLM /metrics (parsed by a Prometheus text parser), two DP ranks', () => {
  let f: TestFleet;
  let base: string;
  beforeAll(async () => {
    f = await startTestFleet(1, {}, { data_parallel_size: 2 });
    base = (f.pods[0] as { base: string }).base;
  });
  afterAll(async () => {
    await f?.close();
  });

  it("exposes vLLM's names, types, labels and buckets", async () => {
    const { fams, text } = await scrape(base);
    const types: Record<string, string> = {
      'vllm:num_requests_running': 'GAUGE',
      'vllm:num_requests_waiting': 'GAUGE',
      'vllm:kv_cache_usage_perc': 'GAUGE',
      'vllm:cache_config_info': 'GAUGE',
      'vllm:prefix_cache_queries_total': 'COUNTER',
      'vllm:prefix_cache_hits_total': 'COUNTER',
      'vllm:num_preemptions_total': 'COUNTER',
      'vllm:prompt_tokens_total': 'COUNTER',
      'vllm:generation_tokens_total': 'COUNTER',
      'vllm:request_success_total': 'COUNTER',
      'vllm:iteration_tokens_total': 'HISTOGRAM',
      'vllm:time_to_first_token_seconds': 'HISTOGRAM',
      'vllm:inter_token_latency_seconds': 'HISTOGRAM',
      'vllm:request_time_per_output_token_seconds': 'HISTOGRAM',
      'vllm:e2e_request_latency_seconds': 'HISTOGRAM',
      'vllm:request_queue_time_seconds': 'HISTOGRAM',
      'vllm:request_inference_time_seconds': 'HISTOGRAM',
      'vllm:request_prefill_time_seconds': 'HISTOGRAM',
      'vllm:request_decode_time_seconds': 'HISTOGRAM',
      'vllm:request_prompt_tokens': 'HISTOGRAM',
      'vllm:request_generation_tokens': 'HISTOGRAM',
      'vllm:request_params_max_tokens': 'HISTOGRAM',
      'vllm:request_prefill_kv_computed_tokens': 'HISTOGRAM',
      process_start_time_seconds: 'GAUGE',
    };
    for (const [name, type] of Object.entries(types)) expect(fams.get(name)?.type, name).toBe(type);
    for (const [name, fam] of fams) {
      if (!name.startsWith('vllm:')) continue;
      if (fam.type === 'COUNTER') expect(name).toMatch(/_total$/);
      if (fam.type === 'HISTOGRAM') {
        for (const rank of ['0', '1'])
          expect(text).toContain(`${name}_count{engine="${rank}",model_name="${MODEL}"}`);
        continue;
      }
      for (const m of fam.metrics) {
        expect(['0', '1']).toContain(m.labels?.engine);
        if (name !== 'vllm:cache_config_info') expect(m.labels?.model_name).toBe(MODEL);
      }
      // One series per DP rank (engine label), plus the finished_reason / source splits.
      const engines = new Set(fam.metrics.map((m) => m.labels?.engine));
      expect(engines).toEqual(new Set(['0', '1']));
    }
    // Bucket bounds as numbers, ascending (object keys lose the exposition order for integer-like bounds).
    const buckets = (name: string) =>
      Object.keys(fams.get(name)?.metrics[0]?.buckets ?? {})
        .map((k) => (k === '+Inf' ? Number.POSITIVE_INFINITY : Number(k)))
        .sort((a, b) => a - b);
    const inf = Number.POSITIVE_INFINITY;
    expect(buckets('vllm:time_to_first_token_seconds')).toEqual([...TTFT, inf]);
    expect(buckets('vllm:e2e_request_latency_seconds')).toEqual([...LATENCY, inf]);
    expect(buckets('vllm:inter_token_latency_seconds')).toEqual([...TPOT, inf]);
    expect(buckets('vllm:iteration_tokens_total')).toEqual([...ITER, inf]);
    expect(buckets('vllm:request_prompt_tokens')).toEqual([
      1,
      2,
      5,
      10,
      20,
      50,
      100,
      200,
      500,
      1000,
      2000,
      5000,
      10000,
      20000,
      inf,
    ]);
    const info = fams.get('vllm:cache_config_info')?.metrics[0];
    expect(info?.labels).toMatchObject({
      block_size: '16',
      num_gpu_blocks: '2208',
      enable_prefix_caching: 'True',
    });
    expect(Number(info?.value)).toBe(1);
  });

  it('creates a prompt_tokens_by_source series for every source of vLLM, with its help texts', async () => {
    const s = await scrape(base);
    // PromptTokenStats.ALL_SOURCES, each pre-created per engine by vLLM's PrometheusStatLogger.
    for (const engine of ['0', '1'])
      for (const source of ['local_compute', 'local_cache_hit', 'external_kv_transfer'])
        expect(
          value(s, 'vllm:prompt_tokens_by_source_total', { engine, source }),
          source,
        ).toBeGreaterThanOrEqual(0);
    expect(
      value(s, 'vllm:prompt_tokens_by_source_total', { engine: '0', source: 'external_kv_transfer' }),
    ).toBe(0);
    expect(s.text).toContain(
      '# HELP vllm:prompt_tokens_cached_total Number of cached prompt tokens (local + external).\n',
    );
    expect(s.text).toContain(
      '# HELP vllm:prompt_tokens_by_source_total Number of prompt tokens by source.\n',
    );
  });

  it('counts no prefix-cache query or hit for a request that skips the cache (prompt_logprobs)', async () => {
    const r0 = { engine: '0' };
    const body = {
      model: MODEL,
      prompt: Array.from({ length: 48 }, (_, i) => 700 + i),
      max_tokens: 1,
      ignore_eos: true,
    };
    const send = async (extra: object) => {
      const res = await fetch(`${base}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-data-parallel-rank': '0' },
        body: JSON.stringify({ ...body, ...extra }),
      });
      expect(res.status).toBe(200);
      return ((await res.json()) as { usage: { prompt_tokens: number } }).usage;
    };
    await send({}); // caches the prompt's blocks
    const before = await scrape(base);
    const u = await send({ prompt_logprobs: 1 });
    const after = await scrape(base);
    const d = (name: string) => value(after, name, r0) - value(before, name, r0);
    expect(d('vllm:prompt_tokens_total')).toBe(u.prompt_tokens);
    // KVCacheManager.record_prefix_cache_stats returns early when the lookup was skipped.
    expect(d('vllm:prefix_cache_queries_total')).toBe(0);
    expect(d('vllm:prefix_cache_hits_total')).toBe(0);
    expect(d('vllm:prompt_tokens_cached_total')).toBe(0);
  });

  it('counts what the API reported, per DP rank (X-data-parallel-rank pins a rank)', async () => {
    const before = await scrape(base);
    const r1 = { engine: '1' };
    const body = {
      model: MODEL,
      messages: [
        {
          role: 'user',
          content: 'a question that is long enough to fill at least one or two blocks of sixteen tokens each',
        },
      ],
      max_tokens: 6,
      ignore_eos: true,
    };
    const send = async () => {
      const res = await fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-data-parallel-rank': '1' },
        body: JSON.stringify(body),
      });
      expect(res.status).toBe(200);
      return (
        (await res.json()) as {
          usage: {
            prompt_tokens: number;
            completion_tokens: number;
            prompt_tokens_details: { cached_tokens: number } | null;
          };
        }
      ).usage;
    };
    const u1 = await send();
    const u2 = await send();
    const after = await scrape(base);
    const d = (name: string, labels: Record<string, string> = r1) =>
      value(after, name, labels) - value(before, name, labels);
    expect(d('vllm:prompt_tokens_total')).toBe(u1.prompt_tokens + u2.prompt_tokens);
    expect(d('vllm:generation_tokens_total')).toBe(12);
    expect(d('vllm:prefix_cache_queries_total')).toBe(u1.prompt_tokens * 2);
    expect(u2.prompt_tokens_details?.cached_tokens).toBeGreaterThan(0);
    expect(d('vllm:prefix_cache_hits_total')).toBe(u2.prompt_tokens_details?.cached_tokens);
    expect(d('vllm:request_success_total', { ...r1, finished_reason: 'length' })).toBe(2);
    expect(d('vllm:time_to_first_token_seconds')).toBe(2);
    expect(d('vllm:inter_token_latency_seconds')).toBe(10);
    // vLLM observes one value per step with outputs: each finished prefill's whole prompt plus the tokens out.
    expect(d('vllm:iteration_tokens_total')).toBe(12);
    expect(
      histogramSample(after, 'vllm:iteration_tokens_total', 'sum', r1) -
        histogramSample(before, 'vllm:iteration_tokens_total', 'sum', r1),
    ).toBe(u1.prompt_tokens + u2.prompt_tokens + 12);
    expect(d('vllm:prompt_tokens_total', { engine: '0' })).toBe(0);
    const bad = await postJson(`${base}/v1/chat/completions`, { ...body, model: 'x' });
    expect(bad.status).toBe(404);
  });

  it('publishes each rank on its own port (port + rank) with its data_parallel_rank', async () => {
    const kv = (f.pods[0] as { kvEvents: string }).kvEvents;
    const port = Number(kv.slice(kv.lastIndexOf(':') + 1));
    const sub = new Subscriber({ linger: 0, receiveTimeout: 200 });
    sub.connect(`tcp://127.0.0.1:${port + 1}`);
    sub.subscribe();
    try {
      let n = 0;
      const batch = await waitFor('a batch from rank 1', async () => {
        await fetch(`${base}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-data-parallel-rank': '1' },
          body: JSON.stringify({
            model: MODEL,
            prompt: Array.from({ length: 40 }, (_, i) => 500 + i + 97 * n++),
            max_tokens: 1,
          }),
        });
        try {
          const [, , payload] = await sub.receive();
          return unpack(payload as Buffer) as unknown[];
        } catch {
          return null;
        }
      });
      expect(batch[2]).toBe(1);
    } finally {
      sub.close();
    }
  });
});
