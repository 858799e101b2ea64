import { readFileSync, readdirSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * Every source file of the library, the tools, the spec helpers and the scripts opens with a comment saying
 * what it is (a `// …` line, or a file-level block comment), before its imports and before the doc of its
 * first declaration: a reader meets the file's purpose first. Specs themselves are exempt.
 */
const ROOT = resolve(fileURLToPath(new URL('../../../', import.meta.url)));
const DIRS = ['src', 'cli', 'harness', 'plugins', 'kong', 'emulator', 'bench', 'spec/helpers', 'scripts'];
/** TypeScript and JavaScript sources, declaration files included (.ts, .d.mts, .mjs, .cjs, …). */
const SOURCE = /\.[cm]?[jt]s$/;
const SPEC = /\.spec\.[cm]?[jt]s$/;
/** The repository's print width (.prettierrc); prettier does not wrap comments, so this line is checked. */
const PRINT_WIDTH = 110;

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((d) => d.isFile() && SOURCE.test(d.name) && !SPEC.test(d.name))
    .map((d) => relative(ROOT, join(d.parentPath, d.name)))
    .filter((path) => !path.split(sep).includes('node_modules'))
    .sort();
}

/** What is wrong with the opening of a source text, or null when its first line is a comment. */
function openingProblem(text: string): string | null {
  const lines = text.split(/\r?\n/);
  // A shebang must stay line 1; the comment then comes right after it.
  const first = lines[0]?.startsWith('#!') ? lines[1] : lines[0];
  if (first === undefined || first.trim() === '') return 'starts with an empty line, not a comment';
  if (first.startsWith('//')) {
    if (!/^\/\/ \S/.test(first)) return `its first comment line says nothing: ${JSON.stringify(first)}`;
    if ([...first].length > PRINT_WIDTH) return `its first line is longer than ${PRINT_WIDTH} characters`;
    return null;
  }
  if (first.startsWith('/*')) return null;
  return `starts with code, not a comment: ${JSON.stringify(first.slice(0, 60))}`;
}

describe('file purpose', () => {
  it('accepts a purpose line or a block comment first, and rejects code, a blank or an empty comment first', () => {
    expect(openingProblem("// The TTFT model.\nimport { a } from './a.js';\n")).toBeNull();
    expect(openingProblem('/**\n * The TTFT model.\n */\nexport const A = 1;\n')).toBeNull();
    expect(openingProblem('/** The TTFT model. */\nexport const A = 1;\n')).toBeNull();
    expect(openingProblem('#!/usr/bin/env node\n// The CLI.\nimport x from "x";\n')).toBeNull();
    expect(openingProblem("import { a } from './a.js';\n// A comment too late.\n")).toMatch(
      /starts with code/,
    );
    expect(openingProblem("export { a } from './a.js';\n")).toMatch(/starts with code/);
    expect(openingProblem("\n// The TTFT model.\nimport { a } from './a.js';\n")).toMatch(/empty line/);
    expect(openingProblem('')).toMatch(/empty line/);
    expect(openingProblem('//\nimport x from "x";\n')).toMatch(/says nothing/);
    expect(openingProblem('#!/usr/bin/env node\nimport x from "x";\n')).toMatch(/starts with code/);
    expect(openingProblem(`// ${'x'.repeat(PRINT_WIDTH)}\n`)).toMatch(/longer than/);
  });

  it.each(DIRS)('every source file under %s/ opens with a comment saying what it is', (dir) => {
    const files = sourceFiles(dir);
    expect(files.length).toBeGreaterThan(0);
    const problems = files.flatMap((file) => {
      const problem = openingProblem(readFileSync(join(ROOT, file), 'utf8'));
      return problem === null ? [] : [`${file}: ${problem}`];
    });
    expect(problems).toEqual([]);
  });
});
