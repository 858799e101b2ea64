// `kinference validate`: what it finds in Kong declarative files, KongPlugin manifests and fleet files, said in
// words, with the route and the line (issue #34).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatReport, validateFile } from '../../../src/cli/validate-file.js';
import { QWEN3_DIR } from '../../helpers/qwen3.js';

const KONG = `_format_version: "3.0"
services:
  - name: vllm
    url: http://vllm:8000
    routes:
      - name: chat
        paths: ["/v1/chat/completions"]
        plugins:
          - name: kinference
            config:
              redis_url: 127.0.0.1:6390
              tokenizer: Qwen/Qwen3-8B
              chat_templte: chatml
              block_size: 0
plugins:
  - name: kinferance
  - name: kinference
    route: chat
    enabeld: true
    config:
      index: mongo
`;

describe('validateFile', () => {
  let dir: string;
  const write = (name: string, text: string): string => {
    const p = join(dir, name);
    writeFileSync(p, text);
    return p;
  };
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'kinf-validate-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('names the route, the field and the line, and says what is expected in words', async () => {
    const file = write('kong.yaml', KONG);
    const r = await validateFile(file);
    expect(r).toMatchObject({ kind: 'kong', entries: 2 });
    const where = 'service "vllm" › route "chat" (services[0].routes[0].plugins[0])';
    expect(r.problems).toEqual([
      {
        where,
        field: 'config.redis_url',
        line: 11,
        message:
          'expected a Redis URL: redis://[user:password@]host:port/db, or rediss://… for TLS (got "127.0.0.1:6390")',
      },
      {
        where,
        field: 'config.tokenizer',
        line: 12,
        message: expect.stringMatching(
          /^expected a tokenizer spec: tiktoken:<encoding> .* or hf:<.*Hugging Face model id.*> \(got "Qwen\/Qwen3-8B"\)$/,
        ),
      },
      {
        where,
        field: 'config.chat_templte',
        line: 13,
        message: 'unknown key; did you mean "chat_template"?',
      },
      {
        where,
        field: 'config.block_size',
        line: 14,
        message: expect.stringMatching(/^expected a whole number from 1 to 4096 \(got 0\)/),
      },
      {
        where: '(plugins[0])',
        field: 'name',
        line: 16,
        message: 'plugin "kinferance": did you mean "kinference"?',
      },
      {
        where: 'route "chat" (plugins[1])',
        field: 'enabeld',
        line: 19,
        message: 'unknown key of a plugin entry; did you mean "enabled"?',
      },
      {
        where: 'route "chat" (plugins[1])',
        field: 'config.index',
        line: 21,
        message: expect.stringMatching(/^expected one of: "redis", "memory" \(got "mongo"\)/),
      },
    ]);
    const text = formatReport(r);
    expect(text.problems[0]).toBe(
      `${file}:11: ${where}: config.redis_url: expected a Redis URL: redis://[user:password@]host:port/db, or rediss://… for TLS (got "127.0.0.1:6390")`,
    );
    expect(text.summary).toBe(`${file}: 7 problems in 2 kinference plugin entries (Kong declarative file)`);
  });

  it("applies the plugin's cross-field rules once every field is valid", async () => {
    const r = await validateFile(
      write(
        'cross.json',
        JSON.stringify({
          _format_version: '3.0',
          plugins: [{ name: 'kinference', config: { redis_cluster_nodes: ['10.0.0.9:7001'] } }],
        }),
      ),
    );
    expect(r.problems).toEqual([
      expect.objectContaining({
        field: 'config.redis_cluster_nodes',
        message: expect.stringContaining('set, but redis_cluster is not'),
      }),
    ]);
  });

  it("passes the repository's own Kong file, KongPlugin manifest and fleet files", async () => {
    for (const f of [
      'kong/kong.yaml',
      'spec/fixtures/kong/kong.yaml',
      'deploy/kubernetes/kong/kongplugin.yaml',
      'deploy/compose/fleet.vllm.yaml',
      'deploy/compose/fleet.emulator.yaml',
    ]) {
      const r = await validateFile(f);
      expect(r.problems, f).toEqual([]);
      expect(r.entries, f).toBeGreaterThan(0);
    }
    expect(formatReport(await validateFile('deploy/kubernetes/kong/kongplugin.yaml')).summary).toBe(
      'deploy/kubernetes/kong/kongplugin.yaml: 1 kinference plugin entry valid (KongPlugin manifest)',
    );
  });

  it('checks KongPlugin manifests among other documents', async () => {
    const r = await validateFile(
      write(
        'kic.yaml',
        [
          'apiVersion: v1\nkind: Service\nmetadata: {name: x}',
          'apiVersion: configuration.konghq.com/v1\nkind: KongPlugin\nmetadata: {name: kinf}\nplugin: kinference\nconfig:\n  fallbak: least-loaded',
        ].join('\n---\n'),
      ),
    );
    expect(r).toMatchObject({
      kind: 'kic',
      entries: 1,
      problems: [
        {
          where: 'KongPlugin "kinf" (document 2)',
          field: 'config.fallbak',
          line: 10,
          message: 'unknown key; did you mean "fallback"?',
        },
      ],
    });
  });

  it('checks a fleet file with its own rules', async () => {
    const r = await validateFile(
      write(
        'fleet.yaml',
        'models:\n  m:\n    tokenizer: tiktoken:o200k_base\npods:\n  - {id: a, model: other, address: "10.0.0.1:8000"}\n',
      ),
    );
    expect(r).toMatchObject({
      kind: 'fleet',
      entries: 1,
      problems: [{ field: 'pods.0.model', message: '"other" is not listed under models', line: 5 }],
    });
  });

  it('refuses a file with nothing to check, or not YAML, rather than passing it', async () => {
    const none = await validateFile(write('none.yaml', '_format_version: "3.0"\nplugins:\n  - name: cors\n'));
    expect(none.problems).toEqual([
      expect.objectContaining({ message: expect.stringMatching(/no kinference plugin entry/) }),
    ]);
    const bad = await validateFile(write('bad.yaml', 'plugins: [\n'));
    expect(bad.problems[0]!.message).toMatch(/^not valid YAML or JSON/);
    const other = await validateFile(write('other.yaml', 'hello: world\n'));
    expect(other.problems[0]!.message).toMatch(/say which with --kind/);
    const missing = await validateFile(join(dir, 'absent.yaml'));
    expect(missing.problems[0]!.message).toMatch(/^cannot read/);
  });

  it('--check-files loads the files the config names (off by default)', async () => {
    const file = write(
      'files.yaml',
      `plugins:\n  - name: kinference\n    config:\n      tokenizer: hf:${join(dir, 'nope.json')}\n      chat_template: hf:${QWEN3_DIR}tokenizer_config.json\n`,
    );
    expect((await validateFile(file)).problems).toEqual([]);
    const r = await validateFile(file, { checkFiles: true });
    expect(r.problems).toEqual([
      expect.objectContaining({ field: 'config.tokenizer', message: expect.stringMatching(/cannot read/) }),
    ]);
  });
});
