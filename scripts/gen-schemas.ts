/**
 * Generates the checked-in schemas from the one config source (src/config/plugin-config.ts):
 *   schemas/plugin-config.schema.json   JSON Schema (editor completion, CI checks of kong.yaml plugin config)
 *   schemas/kinference.kong-schema.json Kong's plugin schema, exactly what --dump-all-plugins reports
 *   schemas/kinference.schema.lua       the same as a Lua schema.lua (Konnect/hybrid control planes need Lua)
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

function luaString(s: string): string {
  return `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;
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

/** Path (relative to the repo root) → file content. Pure: the freshness test calls it. */
export function renderSchemaFiles(): Record<string, string> {
  const kong = toKongPluginSchema(PLUGIN_NAME, PluginConfigSchema);
  const jsonSchema = {
    $schema: 'http://json-schema.org/draft-07/schema#',
    $comment: HEADER,
    title: 'kinference plugin config',
    ...PluginConfigSchema,
  };
  return {
    'schemas/plugin-config.schema.json': `${JSON.stringify(jsonSchema, null, 2)}\n`,
    'schemas/kinference.kong-schema.json': `${JSON.stringify(kong, null, 2)}\n`,
    'schemas/kinference.schema.lua': renderLua(kong.fields[0].config.fields),
  };
}

/** Files whose checked-in content differs from what the config source generates. */
export function staleSchemaFiles(root = ROOT): string[] {
  const stale: string[] = [];
  for (const [rel, content] of Object.entries(renderSchemaFiles())) {
    let current: string | null;
    try {
      current = readFileSync(join(root, rel), 'utf8');
    } catch {
      current = null;
    }
    if (current !== content) stale.push(rel);
  }
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
