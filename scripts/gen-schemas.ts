/**
 * Generates the checked-in schemas from the one config source (src/config/plugin-config.ts):
 *   schemas/plugin-config.schema.json   JSON Schema (editor completion, CI checks of kong.yaml plugin config)
 *   schemas/kinference.kong-schema.json Kong's plugin schema, exactly what --dump-all-plugins reports
 *   schemas/kinference.schema.lua       the same as a Lua schema.lua (Konnect/hybrid control planes need Lua)
 *   docs/configuration.md               the configuration reference (README.md links it, no copy)
 * Usage: `npm run gen:schemas` to write, `npm run gen:schemas -- --check` to fail when a file is stale.
 * spec/01-unit/kong/schemas-fresh.spec.ts runs the check in the test suite.
 */
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PluginConfigSchema } from '../src/config/plugin-config.js';
import { toKongPluginSchema, type KongField, type KongFieldEntry } from '../src/config/to-kong-schema.js';

export const PLUGIN_NAME = 'kinference';
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const HEADER = 'Generated from src/config/plugin-config.ts by scripts/gen-schemas.ts: do not edit.';

/** A Lua string literal: backslash and quote escaped, control characters as decimal escapes (\9, \10, …). */
function luaString(s: string): string {
  const body = s
    .replace(/\\/g, '\\\\')
    .replace(/"/g, '\\"')
    // eslint-disable-next-line no-control-regex
    .replace(/[\x00-\x1f\x7f]/g, (c) => `\\${c.charCodeAt(0).toString().padStart(3, '0')}`);
  return `"${body}"`;
}

function luaValue(v: unknown, indent: string): string {
  if (v === null || v === undefined) return 'nil';
  if (typeof v === 'string') return luaString(v);
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  const inner = `${indent}  `;
  if (Array.isArray(v)) {
    if (v.length === 0) return '{}';
    return `{\n${v.map((x) => `${inner}${luaValue(x, inner)},`).join('\n')}\n${indent}}`;
  }
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length === 0) return '{}';
  const key = (k: string): string => (/^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? k : `[${luaString(k)}]`);
  return `{\n${entries.map(([k, x]) => `${inner}${key(k)} = ${luaValue(x, inner)},`).join('\n')}\n${indent}}`;
}

function renderLua(fields: KongFieldEntry[]): string {
  const config: { config: KongField } = { config: { type: 'record', fields } };
  return [
    `-- ${HEADER}`,
    '-- Kong schema of the kinference external plugin, for control planes that need a Lua schema.',
    'local typedefs = require "kong.db.schema.typedefs"',
    '',
    'return {',
    `  name = ${luaString(PLUGIN_NAME)},`,
    '  fields = {',
    '    { protocols = typedefs.protocols_http },',
    `    ${luaValue(config, '    ')},`,
    '  },',
    '}',
    '',
  ].join('\n');
}

function describeType(f: Record<string, unknown>): string {
  if (Array.isArray(f.anyOf))
    return (f.anyOf as { const?: unknown }[]).map((x) => `\`${String(x.const)}\``).join(' \\| ');
  const t = String(f.type ?? 'object');
  if (t === 'object' && f.patternProperties) return 'map';
  const bounds: string[] = [];
  if (f.minimum !== undefined || f.maximum !== undefined)
    bounds.push(`${f.minimum ?? ''}–${f.maximum ?? ''}`);
  return bounds.length > 0 ? `${t} (${bounds.join(', ')})` : t;
}

/** The configuration reference as a Markdown table, from the same source as the schemas. */
export function renderConfigReference(): string {
  const rows = Object.entries(PluginConfigSchema.properties).map(([name, field]) => {
    const f = field as Record<string, unknown>;
    const def = f.default === undefined ? '*(unset)*' : `\`${JSON.stringify(f.default)}\``;
    const desc = String(f.description ?? '').replace(/\|/g, '\\|');
    return `| \`${name}\` | ${describeType(f)} | ${def} | ${desc} |`;
  });
  return [
    `<!-- ${HEADER} -->`,
    '| field | type | default | meaning |',
    '|---|---|---|---|',
    ...rows,
    '',
  ].join('\n');
}

/**
 * The schema of a config as a user writes it: TypeBox lists every field without Optional as required, defaults
 * included, because it checks configs after filling them in. A field with a default may be left out.
 */
function asWritten(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(asWritten);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) out[k] = asWritten(v);
  const props = out.properties as Record<string, { default?: unknown }> | undefined;
  if (props && Array.isArray(out.required)) {
    const required = (out.required as string[]).filter((k) => props[k]?.default === undefined);
    if (required.length > 0) out.required = required;
    else delete out.required;
  }
  return out;
}

/** docs/configuration.md before the reference: where it comes from, and where the fleet file is described. */
const CONFIGURATION_INTRO = `The \`config\` of the \`kinference\` plugin on a Kong route or service (decK, \`KongPlugin\`; examples in
[deployment](deployment.md)). Generated from the one config source (\`src/config/plugin-config.ts\`), like the
Kong schema (\`schemas/kinference.kong-schema.json\`), the JSON Schema and the TypeScript type; \`npm run
gen:schemas\` rewrites this page and a test fails when it is stale.

The collector, \`explain\`, the emulator and the demo share one fleet YAML (models, pods or \`kubernetes:\`,
\`collector:\`, \`emulator:\`, \`router:\` sections): [collector](collector.md) for the fleet, \`collector:\` and
\`router:\`, [emulator](emulator.md) for \`emulator:\`.
`;

/** docs/configuration.md after the reference: how to check a config before deploying it, and model ids. */
const CHECKING_A_CONFIG = `## Checking a config before it is deployed

\`kinference validate\` checks every \`kinference\` plugin entry of a decK/Kong declarative file (YAML or JSON;
plugins at the top level or under services, routes, consumers), of a \`KongPlugin\`/\`KongClusterPlugin\`
manifest, or of a fleet file, offline, with the plugin's own schema (the one above) and its cross-field rules.
decK does not know an external plugin's schema, so \`deck file validate\` passes a misspelled field; without
this, starting the gateway is the first check. Each problem names the file and line, the route or service, the
field, and what it takes in words; an unknown field gets the closest known one:

\`\`\`text
kong.yaml:11: service "vllm" › route "chat" (services[0].routes[0].plugins[0]): config.redis_url: expected a Redis URL: redis://[user:password@]host:port/db, or rediss://… for TLS (got "127.0.0.1:6390")
kong.yaml:13: service "vllm" › route "chat" (services[0].routes[0].plugins[0]): config.chat_templte: unknown key; did you mean "chat_template"?
kong.yaml: 2 problems in 1 kinference plugin entry (Kong declarative file)
\`\`\`

It exits 1 on any problem, 0 with one summary line per file; \`--json\` prints the findings for CI, \`--kind
kong|kic|fleet\` skips detection. As a CI step, next to decK's own check:

\`\`\`bash
deck file validate kong/kong.yaml                # decK: structure and references
node bin/kinference.js validate kong/kong.yaml   # or: docker run --rm -v "$PWD:/w" -w /w kinference validate kong/kong.yaml
\`\`\`

\`--check-files\` also loads the tokenizer and chat template the config names (and reads the Redis TLS files).
It is off by default because those are paths on the gateway (relative ones against its working directory) or
models in the gateway's Hugging Face cache, not on the CI runner: run it on the gateway host or in its image.
Kong and the plugin say the same words: a field that fails Kong's own check answers with them (the Kong schema's
\`match_any.err\`), and a plugin that disables itself for a bad config logs them.

## Hugging Face model ids

\`tokenizer\` and \`chat_template\` take \`hf:<Hugging Face model id>\` as vLLM users write it:
\`hf:Qwen/Qwen3-8B\` reads \`tokenizer.json\` (or \`tokenizer_config.json\`) of the model from the local Hugging Face
cache — \`$HF_HUB_CACHE\`, else \`$HF_HOME/hub\`, else \`~/.cache/huggingface/hub\` — at
\`models--Qwen--Qwen3-8B/snapshots/<refs/main>/\`; \`hf:Qwen/Qwen3-8B@<branch, tag or commit>\` pins a revision. A
model that is not cached is an error naming the file looked for and the command that fetches it
(\`huggingface-cli download Qwen/Qwen3-8B tokenizer.json tokenizer_config.json\`). A path (absolute, relative,
ending in .json or .jinja, or a model directory) is read as a path. Details: [tokenizers](tokenizers.md).
`;

/** Path (relative to the repo root) → file content. Pure: the freshness test calls it. */
export function renderSchemaFiles(): Record<string, string> {
  const kong = toKongPluginSchema(PLUGIN_NAME, PluginConfigSchema);
  const jsonSchema = {
    $schema: 'http://json-schema.org/draft-07/schema#',
    $comment: HEADER,
    title: 'kinference plugin config',
    ...(asWritten(PluginConfigSchema) as object),
  };
  return {
    'schemas/plugin-config.schema.json': `${JSON.stringify(jsonSchema, null, 2)}\n`,
    'schemas/kinference.kong-schema.json': `${JSON.stringify(kong, null, 2)}\n`,
    'schemas/kinference.schema.lua': renderLua(kong.fields[0].config.fields),
    'docs/configuration.md': `# Plugin configuration\n\n${CONFIGURATION_INTRO}\n${renderConfigReference()}\n${CHECKING_A_CONFIG}`,
  };
}

function readOrNull(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

/** Files whose checked-in content differs from what the config source generates. */
export function staleSchemaFiles(root = ROOT): string[] {
  const stale: string[] = [];
  for (const [rel, content] of Object.entries(renderSchemaFiles()))
    if (readOrNull(join(root, rel)) !== content) stale.push(rel);
  return stale;
}

function main(): void {
  if (process.argv.includes('--check')) {
    const stale = staleSchemaFiles();
    if (stale.length > 0) {
      process.stderr.write(`stale generated schemas (run npm run gen:schemas): ${stale.join(', ')}\n`);
      process.exit(1);
    }
    return;
  }
  for (const [rel, content] of Object.entries(renderSchemaFiles())) {
    const path = join(ROOT, rel);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, content);
    process.stdout.write(`wrote ${rel}\n`);
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
