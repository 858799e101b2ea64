// When the sources last changed, and the stamp the build leaves in dist/ saying which sources it compiled:
// scripts/build.mjs writes it, scripts/build-if-stale.mjs compares it.
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** What the build reads: the compiled folders, the plugin bundle's inputs, the build scripts and configs. */
const INPUTS = ['src', 'cli', 'harness', 'plugins', 'kong', 'emulator', 'bench', 'scripts'];
const ROOT_FILES = /^(tsconfig.*\.json|package(-lock)?\.json)$/;
/** Written by the benchmarks, not read by the build. */
const SKIP = new Set([join('bench', 'results')]);
/** dist/ is removed by a build, and the stamp with it: a failed build leaves none. */
const STAMP = join('dist', '.build-stamp');

/** The newest mtime under `dir`, directories included (a deleted or renamed file changes its folder's). */
function newest(dir) {
  let t = statSync(dir).mtimeMs;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (SKIP.has(p)) continue;
    t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
}

/** When an input last changed (ms), over the folders that exist (the runtime image has fewer). */
export function sourcesTime() {
  let t = 0;
  for (const d of INPUTS) if (existsSync(d)) t = Math.max(t, newest(d));
  for (const f of readdirSync('.')) if (ROOT_FILES.test(f)) t = Math.max(t, statSync(f).mtimeMs);
  return t;
}

/** Records that dist/ holds the sources as of `time` (taken BEFORE building: a save during it is not in). */
export function writeStamp(time) {
  writeFileSync(STAMP, `${time}\n`);
}

/** True when dist/ was not built, or not from the sources as they are now. */
export function isStale() {
  if (!existsSync(STAMP)) return true;
  const built = Number(readFileSync(STAMP, 'utf8'));
  return !(built >= sourcesTime());
}
