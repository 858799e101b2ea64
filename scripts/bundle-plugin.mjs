// Bundles the Kong plugin into ONE CommonJS file, alone in its directory (kong-js-pluginserver loads every
// entry of the directory as a plugin; Kong ≥ 3.9 registers only the first plugin of a query command).
//
// Externals: native addons and packages that read data files at run time cannot be inlined. They are
// require()d at run time and resolved from node_modules the usual way (walking up from the plugin file), so
// the directory above the plugin directory — or NODE_PATH — must hold them: in this repo that is the repo's
// node_modules; in Kong's image, `npm install` them next to the plugin tree (see docs/plugin.md).
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** Runtime packages the bundle require()s instead of inlining (install them where Kong runs the plugin). */
export const PLUGIN_EXTERNALS = ['tokenizers', 'tiktoken'];

/**
 * Writes <outRoot>/kinference/kinference.js and <outRoot>/package.json ({"type":"commonjs"}: the repo is
 * "type":"module", and a CJS .js under it would otherwise load as ESM). Returns the plugin directory.
 */
export async function bundlePlugin(outRoot = join(ROOT, 'dist', 'plugins')) {
  const { build } = await import('esbuild');
  const dir = join(outRoot, 'kinference');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  // The tokenizer worker (src/tokenize/off-thread/worker.ts) is carried inside the plugin file as text and
  // started with `eval: true`: Kong deployments copy that one file, so the worker cannot be a file beside it.
  // Its `require` resolves the runtime externals from the plugin file, passed as workerData.moduleFile.
  const worker = await build({
    absWorkingDir: ROOT,
    entryPoints: [join(ROOT, 'src/tokenize/off-thread/worker.ts')],
    write: false,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    external: PLUGIN_EXTERNALS,
    logLevel: 'warning',
    legalComments: 'none',
    define: { 'import.meta.url': '__kinferenceModuleUrl' },
  });
  const workerSource = [
    "(function (require) { const __kinferenceModuleUrl = require('node:url').pathToFileURL(",
    "require('node:worker_threads').workerData.moduleFile).href;\n",
    worker.outputFiles[0].text,
    "\n})(require('node:module').createRequire(require('node:worker_threads').workerData.moduleFile));",
  ].join('');
  await build({
    absWorkingDir: ROOT,
    entryPoints: [join(ROOT, 'plugins/kinference/kinference.ts')],
    outfile: join(dir, 'kinference.js'),
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    external: PLUGIN_EXTERNALS,
    logLevel: 'warning',
    legalComments: 'none',
    sourcemap: false,
    // ESM sources locate package data with createRequire(import.meta.url); in CommonJS that is the bundle file.
    define: {
      'import.meta.url': '__kinferenceModuleUrl',
      __KINFERENCE_TOKENIZE_WORKER__: JSON.stringify(workerSource),
    },
    banner: { js: "const __kinferenceModuleUrl = require('node:url').pathToFileURL(__filename).href;" },
  });
  writeFileSync(join(outRoot, 'package.json'), '{ "type": "commonjs" }\n');
  const entries = readdirSync(dir);
  if (entries.length !== 1 || entries[0] !== 'kinference.js')
    throw new Error(`plugin directory must hold only kinference.js, found: ${entries.join(', ')}`);
  return dir;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const dir = await bundlePlugin(process.argv[2] ? resolve(process.argv[2]) : undefined);
  process.stdout.write(`bundled ${join(dir, 'kinference.js')}\n`);
}
