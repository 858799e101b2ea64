import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DIRS = [
  'src',
  'plugins',
  'kong',
  'emulator',
  'bench',
  'spec',
  'scripts',
  'docs',
  'bin',
  'deploy',
  'examples',
];
const SKIP = new Set(['node_modules', 'dist', 'results', '.tmp']);
const TEXT = /\.(?:[cm]?[jt]s|lua|md|ya?ml|py|sh)$/;
// The design notes and research files live outside the repository: a user of it has neither. Built from
// parts so that this file does not match itself.
const OUTSIDE = new RegExp(['DESIGN', String.raw`\.md|`, 'research', '/'].join(''));

function* files(dir: string): Generator<string> {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (SKIP.has(e.name)) continue;
    const p = join(dir, e.name);
    if (e.isDirectory()) yield* files(p);
    else if (TEXT.test(e.name)) yield p;
  }
}

describe('references', () => {
  it('cite docs in the repository, never the design notes or research files outside it', () => {
    const found: string[] = [];
    const roots = [...DIRS.map((d) => join(ROOT, d)), join(ROOT, 'README.md')];
    for (const root of roots) {
      const list = root.endsWith('.md') ? [root] : [...files(root)];
      for (const f of list) {
        const lines = readFileSync(f, 'utf8').split('\n');
        lines.forEach((line, i) => {
          if (OUTSIDE.test(line)) found.push(`${relative(ROOT, f)}:${i + 1}: ${line.trim()}`);
        });
      }
    }
    expect(found).toEqual([]);
  });
});
