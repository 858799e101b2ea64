// bench:overhead --only metrics: what recording a decision's metrics adds to a request, side by side.
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { blockKeys, keySeed } from '../../../src/core/block-keys.js';
import { PluginMetricsFlusher, PluginMetricsRecorder } from '../../../src/plugin-metrics/index.js';
import { createUsageRedis } from '../../../src/usage/index.js';
import { percentile } from '../stats/percentile.js';
import { QWEN_MODEL, startQwenRouter } from '../qwen-router.js';

const MODEL = QWEN_MODEL;
const PODS = 8;

const stats = (xs: number[]) => ({
  p50: percentile(xs, 0.5),
  p99: percentile(xs, 0.99),
  mean: xs.reduce((a, b) => a + b, 0) / xs.length,
  n: xs.length,
});

/**
 * Real routes (Qwen3 tokenizer and template, a ~4k-token shared system prompt cached on 3 of 8 pods, a real
 * redis-server), interleaved: odd requests record their decision and TTFT (what the access and log phases
 * add), even ones do not, so both halves see the same load. Every `flushEvery` recorded requests, one flush
 * to the same Redis is timed (in the plugin it runs on a 5 s timer, off the request path).
 */
export async function runMetricsOverhead(qwenDir: string, runs: number, flushEvery = 50) {
  const bench = await startQwenRouter(qwenDir, PODS, (p) => ({ running: p % 3, waiting: 0 }));
  const { redis, config, template, index, router } = bench;
  const promptTokenizer = bench.resources.promptTokenizer();
  try {
    const system = 'The gateway routes each request to the pod that holds its cached prefix. '.repeat(300);
    const body = (i: number) =>
      JSON.stringify({
        model: MODEL,
        messages: [
          { role: 'system', content: system },
          { role: 'user', content: `Question ${i}: which pod holds the prefix of this conversation?` },
        ],
      });
    const rendered = template.render({
      model: MODEL,
      messages: [{ role: 'system', content: system }],
      addGenerationPrompt: false,
      continueFinalMessage: false,
      stream: false,
    });
    const tokens = (await promptTokenizer.tokenize(rendered, config.max_prompt_tokens)).tokens;
    const keys = blockKeys(tokens, config.block_size, keySeed({ model: MODEL }));
    for (const p of [1, 4, 6])
      await index.apply({ model: MODEL, podId: `pod-${p}` }, [{ op: 'store', keys, tier: 'GPU' }]);

    const client = createUsageRedis({ url: redis.url });
    const recorder = new PluginMetricsRecorder();
    const flusher = new PluginMetricsFlusher(client, recorder, { keyPrefix: 'bench' });
    const off: number[] = [];
    const on: number[] = [];
    const recordUs: number[] = [];
    const emptyUs: number[] = [];
    const flushMs: number[] = [];
    const flushFields: number[] = [];
    let promptTokens = 0;
    for (let i = 0; i < 10; i++) router.observe(await router.route(body(-i)), null); // warm-up
    for (let i = 0; i < runs * 2; i++) {
      const out = await router.route(body(i));
      promptTokens = out.promptTokens;
      const t0 = performance.now();
      if (i % 2 === 1) {
        recorder.decision(out);
        recorder.ttft(out, 80 + (i % 40));
      }
      const us = (performance.now() - t0) * 1000;
      (i % 2 === 1 ? recordUs : emptyUs).push(us);
      (i % 2 === 1 ? on : off).push(out.timings.totalMs + us / 1000);
      router.observe(out, null);
      if (i % 2 === 1 && on.length % flushEvery === 0) {
        flushFields.push(recorder.size);
        const f0 = performance.now();
        if (!(await flusher.flush())) throw new Error('flush to the bench Redis failed');
        flushMs.push(performance.now() - f0);
      }
    }
    // The same calls in a tight loop on the last outcome: the per-request cost without the timer's resolution.
    const last = await router.route(body(-1));
    router.observe(last, null);
    const loops = 20_000;
    const cpu0 = process.cpuUsage();
    const l0 = performance.now();
    for (let i = 0; i < loops; i++) {
      recorder.decision(last);
      recorder.ttft(last, 80 + (i % 40));
    }
    const loopUs = ((performance.now() - l0) * 1000) / loops;
    const cpu = process.cpuUsage(cpu0);
    const loopCpuUs = (cpu.user + cpu.system) / loops;
    client.disconnect();
    await router.close();
    return {
      command: 'npm run bench:overhead -- --only metrics',
      date: new Date().toISOString(),
      machine: 'shared 2-core VM; figures are noisy, compare within one run',
      loadavg1mAtEnd: Math.round(loadavg()[0]! * 100) / 100,
      setup: {
        prompt_tokens: promptTokens,
        pods: PODS,
        runs_each: runs,
        interleaved: 'odd requests record (decision + TTFT), even ones do not',
        flush_every_recorded_requests: flushEvery,
      },
      decision_ms: { metrics_off: stats(off), metrics_on: stats(on) },
      record_us: stats(recordUs),
      record_tight_loop_us_per_request: Math.round(loopUs * 1000) / 1000,
      record_tight_loop_cpu_us_per_request: Math.round(loopCpuUs * 1000) / 1000,
      timer_only_us: stats(emptyUs),
      flush_ms: stats(flushMs),
      flush_fields: stats(flushFields),
    };
  } finally {
    await bench.stop();
  }
}
