import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createRouter, defaultResources } from '../../../src/router/index.js';
import { LOAD_RETRY_MS, cachedLoad } from '../../../src/router/resources.js';
import { QWEN3_DIR, qwen3RouterConfig } from '../../helpers/qwen3.js';

const dir = mkdtempSync(join(tmpdir(), 'kinf-res-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('cachedLoad', () => {
  it('keeps a value for good and a failure for LOAD_RETRY_MS', () => {
    let now = 0;
    let calls = 0;
    let broken = true;
    const get = cachedLoad(
      () => {
        calls++;
        if (broken) throw new Error('bad file');
        return 42;
      },
      () => now,
    );
    expect(get).toThrow('bad file');
    expect(get).toThrow('bad file');
    expect(calls).toBe(1);
    broken = false;
    now += LOAD_RETRY_MS - 1;
    expect(get).toThrow('bad file');
    now += 1;
    expect(get()).toBe(42);
    expect(get()).toBe(42);
    expect(calls).toBe(2);
  });
});

describe('defaultResources: a bad tokenizer or template file', () => {
  it('is read once per retry window, its error is the fallback detail, and a fixed file is picked up', async () => {
    const file = join(dir, 'tokenizer.json');
    writeFileSync(file, '{"not": "a tokenizer"}');
    let now = 1_000_000;
    const cfg = qwen3RouterConfig({ tokenizer: `hf:${file}`, model_pods: { m: ['10.0.0.1:8000'] } });
    const router = createRouter(cfg, defaultResources(cfg, { clock: () => now }));
    const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    const first = await router.route(body);
    expect(first.fallbackReason).toBe('tokenizer_error');
    expect(first.fallbackDetail).toContain(file);
    expect(first.target?.podId).toBe('10.0.0.1:8000');

    // Fixed on disk: not re-read before the retry time (it was re-read, 5–7 ms each for 4 MB, every request).
    copyFileSync(join(QWEN3_DIR, 'tokenizer.json'), file);
    const cached = await router.route(body);
    expect(cached.fallbackReason).toBe('tokenizer_error');
    expect(cached.fallbackDetail).toBe(first.fallbackDetail);
    now += LOAD_RETRY_MS;
    expect((await router.route(body)).fallbackReason).toBe('no_pods_in_index');
  });

  it('a bad chat template likewise', async () => {
    const file = join(dir, 'tokenizer_config.json');
    writeFileSync(file, '{}');
    let now = 0;
    const cfg = qwen3RouterConfig({ chat_template: `hf:${file}` });
    const router = createRouter(cfg, defaultResources(cfg, { clock: () => now }));
    const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect((await router.route(body)).fallbackReason).toBe('template_error');
    copyFileSync(join(QWEN3_DIR, 'tokenizer_config.json'), file);
    expect((await router.route(body)).fallbackReason).toBe('template_error');
    now += LOAD_RETRY_MS;
    expect((await router.route(body)).fallbackReason).toBe('no_pods_in_index');
  });
});
