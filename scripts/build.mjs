// Compiles TypeScript to dist/ (ESM) and bundles the Kong plugin into one CommonJS file.
import { execFileSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { sourcesTime, writeStamp } from './build-stamp.mjs';

// Taken before compiling: a file saved during the build makes the next build-if-stale build again.
const inputs = sourcesTime();
rmSync('dist', { recursive: true, force: true });
execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json'], {
  stdio: 'inherit',
});

if (existsSync('plugins/kinference/kinference.ts')) {
  // The Kong plugin: ONE CommonJS file alone in dist/plugins/kinference/ (scripts/bundle-plugin.mjs).
  const { bundlePlugin } = await import('./bundle-plugin.mjs');
  await bundlePlugin();
}

// For scripts/build-if-stale.mjs (npm start, bench:*): dist/ now holds the sources as of `inputs`.
writeStamp(inputs);
