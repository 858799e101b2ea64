import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadFleetConfig } from '../../../src/config/fleet-config.js';
import { pluginConfigFromFleet } from '../../../src/router/from-fleet.js';
import { requestKeys } from '../../../src/router/index.js';
import { QWEN3_TEMPLATE, QWEN3_TOKENIZER } from '../../helpers/qwen3.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';
import { SEEDED_INDEX_CONFIG } from '../../helpers/seeded-index.js';
import { observerIndex } from '../../helpers/observer-index.js';

const cli = fileURLToPath(new URL('../../../bin/kinference.js', import.meta.url));
const examples = fileURLToPath(new URL('../../../examples/', import.meta.url));
const MODEL = 'Qwen/Qwen3-8B';
/** A CLI run's budget (it loads the Qwen3 tokenizer: ~30 s on a loaded machine); the tests' encloses it. */
const CLI_MS = 60_000;

describe('kinference explain (built CLI, real Redis)', { timeout: CLI_MS + 15_000 }, () => {
  let redis: TestRedis;
  let dir: string;
  let fleetPath: string;
  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'kinf-explain-'));
    fleetPath = join(dir, 'fleet.yaml');
    writeFileSync(
      fleetPath,
      stringify({
        redis_url: redis.url,
        // Seeded below, not kept fresh by a collector; the CLI may start slower than stale_after_ms.
        router: SEEDED_INDEX_CONFIG,
        models: { [MODEL]: { tokenizer: QWEN3_TOKENIZER, chat_template: QWEN3_TEMPLATE } },
        pods: [
          { id: 'pod-a', model: MODEL, address: '127.0.0.1:18001' },
          { id: 'pod-b', model: MODEL, address: '127.0.0.1:18002' },
        ],
      }),
    );
    // What the collector would have written: both pods registered, pod-b holding the first request's blocks.
    const fleet = loadFleetConfig(fleetPath);
    const cfg = pluginConfigFromFleet(fleet, MODEL, fleetPath);
    const index = observerIndex({ kind: 'redis', url: redis.url });
    const now = Date.now();
    for (const [podId, address] of [
      ['pod-a', '127.0.0.1:18001'],
      ['pod-b', '127.0.0.1:18002'],
    ] as const)
      await index.upsertPodState(
        { model: MODEL, podId },
        { address, lastScrapeAtMs: now, lastEventAtMs: now },
      );
    const keys = await requestKeys(cfg, readFileSync(join(examples, 'chat-request.json'), 'utf8'));
    await index.apply({ model: MODEL, podId: 'pod-b' }, [{ op: 'store', keys, tier: 'GPU' }]);
    await index.close();
  });
  afterAll(async () => {
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('prints the decision as JSON: candidates with cached tokens and predictions, and the chosen pod', () => {
    const r = spawnSync(
      process.execPath,
      [cli, 'explain', '--config', fleetPath, '--body', join(examples, 'chat-request-followup.json')],
      { encoding: 'utf8', timeout: CLI_MS },
    );
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as {
      chosen: { pod: string };
      fallback_reason: string | null;
      candidates: { pod: string; cached_tokens: number; predicted_ttft_ms: number }[];
      tokenizer: { spec: string; engine: string };
    };
    expect(out.fallback_reason).toBeNull();
    expect(out.tokenizer).toEqual({ spec: QWEN3_TOKENIZER, engine: 'js-bpe' });
    expect(out.chosen.pod).toBe('pod-b');
    expect(out.candidates.map((c) => c.pod)).toEqual(['pod-b', 'pod-a']);
    expect(out.candidates[0]!.cached_tokens).toBeGreaterThan(1000);
    expect(out.candidates[1]!.cached_tokens).toBe(0);
    expect(out.candidates[0]!.predicted_ttft_ms).toBeLessThan(out.candidates[1]!.predicted_ttft_ms);
  });

  it('names the file and the field on a bad config, without a stack trace', () => {
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, stringify({ models: { m: { block_size: 0 } }, pods: [] }));
    const r = spawnSync(process.execPath, [cli, 'explain', '--config', bad, '--body', 'x.json'], {
      encoding: 'utf8',
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(`${bad}: invalid configuration`);
    expect(r.stderr).toContain('models.m.block_size');
    expect(r.stderr).not.toMatch(/at .*\.js:\d+:\d+/);
  });
});
