// `npm start` and `npm run bench:*` build only when a source changed (scripts/build-if-stale.mjs): the stamp
// logic on a temporary tree, and every such script going through it (issue #34: each rebuilt for 26–32 s).
import { mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isStale, sourcesTime, writeStamp } from '../../../scripts/build-stamp.mjs';

const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {
  scripts: Record<string, string>;
};

describe('build only when stale', () => {
  const cwd = process.cwd();
  let dir: string;
  const later = (path: string, s: number): void =>
    utimesSync(path, new Date(), new Date(Date.now() + s * 1000));
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'kinf-stale-'));
    for (const d of ['src/core', 'bench/results', 'dist']) mkdirSync(join(dir, d), { recursive: true });
    writeFileSync(join(dir, 'src/core/a.ts'), 'export {};\n');
    writeFileSync(join(dir, 'src/core/b.ts'), 'export {};\n');
    writeFileSync(join(dir, 'tsconfig.json'), '{}\n');
    process.chdir(dir);
  });
  afterAll(() => {
    process.chdir(cwd);
    rmSync(dir, { recursive: true, force: true });
  });

  it('is stale without a stamp, fresh after one, stale again when a source, a folder or a config changes', () => {
    expect(isStale()).toBe(true);
    writeStamp(sourcesTime());
    expect(isStale()).toBe(false);
    // A benchmark writing its results is not a source change.
    writeFileSync('bench/results/x.json', '{}');
    later('bench/results/x.json', 60);
    expect(isStale()).toBe(false);
    later('src/core/a.ts', 60);
    expect(isStale()).toBe(true);
    writeStamp(sourcesTime());
    rmSync('src/core/b.ts');
    later('src/core', 120);
    expect(isStale()).toBe(true);
    writeStamp(sourcesTime());
    later('tsconfig.json', 180);
    expect(isStale()).toBe(true);
  });

  it('npm start and every bench:* script build through it, never unconditionally', () => {
    const scripts = Object.entries(pkg.scripts).filter(
      ([name]) => name === 'start' || name.startsWith('bench:'),
    );
    expect(scripts.length).toBeGreaterThan(10);
    for (const [name, command] of scripts) {
      expect(command, name).toMatch(/^node scripts\/build-if-stale\.mjs && node /);
      expect(command, name).not.toContain('npm run build');
    }
  });
});
