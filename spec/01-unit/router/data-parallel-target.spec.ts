import { describe, expect, it } from 'vitest';
import { PluginConfigSchema } from '../../../src/config/plugin-config.js';
import { validateConfig } from '../../../src/config/validate.js';
import { dataParallelPodId, dataParallelRankOf } from '../../../src/core/types.js';
import { createRouter, defaultResources } from '../../../src/router/index.js';
import { QWEN3_TEMPLATE, QWEN3_TOKENIZER } from '../../helpers/qwen3.js';

const MODEL = 'Qwen/Qwen3-8B';
const NOW = 1_000_000;
const body = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Hello there.' }] });

async function routeOver(pods: { podId: string; waiting: number }[]) {
  const cfg = validateConfig(
    PluginConfigSchema,
    { index: 'memory', tokenizer: QWEN3_TOKENIZER, chat_template: QWEN3_TEMPLATE },
    'test',
  );
  const res = defaultResources(cfg);
  for (const p of pods)
    await res.index.upsertPodState(
      { model: MODEL, podId: p.podId },
      {
        address: '10.0.0.1:8000',
        waiting: p.waiting,
        meanQueuedPrefillTokens: 2000,
        lastScrapeAtMs: NOW - 1,
        lastEventAtMs: NOW - 1,
      },
    );
  return createRouter(cfg, res, { clock: () => NOW }).route(body);
}

describe('router: a data-parallel rank as the target', () => {
  it('names the rank of a `<pod>@dp<r>` target, for X-data-parallel-rank', async () => {
    const o = await routeOver([
      { podId: 'vllm-0@dp0', waiting: 3 },
      { podId: 'vllm-0@dp1', waiting: 0 },
    ]);
    expect(o.target).toEqual({ host: '10.0.0.1', port: 8000, podId: 'vllm-0@dp1', dataParallelRank: 1 });
  });

  it('names no rank for a pod with one rank', async () => {
    const o = await routeOver([{ podId: 'vllm-0', waiting: 0 }]);
    expect(o.target).toEqual({ host: '10.0.0.1', port: 8000, podId: 'vllm-0' });
  });

  it('reads back the rank the collector writes into the pod id', () => {
    expect(dataParallelRankOf(dataParallelPodId('vllm-0', 12))).toBe(12);
    expect(dataParallelRankOf('vllm-0')).toBeNull();
    expect(dataParallelRankOf('dp1')).toBeNull();
    expect(dataParallelRankOf('vllm-0@dp')).toBeNull();
  });
});
