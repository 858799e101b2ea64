// Compiles TypeScript to dist/ (ESM) and bundles the Kong plugin into one CommonJS file.
import { execFileSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';

rmSync('dist', { recursive: true, force: true });
execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json'], {
  stdio: 'inherit',
});

if (existsSync('plugins/kinference/kinference.ts')) {
  // The Kong plugin: ONE CommonJS file alone in dist/plugins/kinference/ (scripts/bundle-plugin.mjs).
  const { bundlePlugin } = await import('./bundle-plugin.mjs');
  await bundlePlugin();
}
