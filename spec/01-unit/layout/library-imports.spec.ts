import { readFileSync, readdirSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * The layering the developers' guide states: src/ is the library and imports nothing above it (bench/,
 * emulator/, kong/, plugins/, the cli/ composition root, spec/); src/tokenize does not read the fleet file
 * (src/config). And what the runtime image's pruned node_modules holds is enough for the library and the CLI.
 */
const ROOT = resolve(fileURLToPath(new URL('../../../', import.meta.url)));
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
};

function tsFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((d) => d.isFile() && d.name.endsWith('.ts'))
    .map((d) => relative(ROOT, join(d.parentPath, d.name)));
}

/** Every module specifier of a source: static and dynamic imports, `export … from`, type-only imports. */
export function specifiers(source: string): string[] {
  return ts.preProcessFile(source, true, true).importedFiles.map((f) => f.fileName);
}

/** Repository-relative path a relative specifier points to, or null for a package or node: builtin. */
function target(file: string, spec: string): string | null {
  if (!spec.startsWith('.')) return null;
  return relative(ROOT, resolve(ROOT, dirname(file), spec));
}

const inside = (path: string, dir: string): boolean => path === dir || path.startsWith(`${dir}${sep}`);

function imports(dir: string): { file: string; spec: string; to: string | null }[] {
  return tsFiles(dir).flatMap((file) =>
    specifiers(readFileSync(join(ROOT, file), 'utf8')).map((spec) => ({
      file,
      spec,
      to: target(file, spec),
    })),
  );
}

/** The package a bare specifier names: `@scope/name/sub` → `@scope/name`, `name/sub` → `name`. */
function packageName(spec: string): string {
  const parts = spec.split('/');
  return spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

describe('library layout', () => {
  it('reads static, dynamic, re-exported and type-only imports (the checks below see all of them)', () => {
    const src = [
      "import { a } from '../bench/x.js';",
      "import type { B } from '../emulator/y.js';",
      "export { c } from '../kong/z.js';",
      "const d = await import('../cli/main.js');",
    ].join('\n');
    expect(specifiers(src)).toEqual(['../bench/x.js', '../emulator/y.js', '../kong/z.js', '../cli/main.js']);
  });

  it('src/ imports nothing outside src/ (no bench/, emulator/, kong/, plugins/, cli/ or spec/)', () => {
    const upward = imports('src').filter((i) => i.to !== null && !inside(i.to, 'src'));
    expect(upward.map((i) => `${i.file}: ${i.spec}`)).toEqual([]);
  });

  it('src/tokenize imports nothing from src/config (the fleet file is read by its callers)', () => {
    const config = imports('src/tokenize').filter(
      (i) => i.to !== null && inside(i.to, join('src', 'config')),
    );
    expect(config.map((i) => `${i.file}: ${i.spec}`)).toEqual([]);
  });

  it('src/ and the cli/ composition root use only runtime dependencies (the images prune devDependencies)', () => {
    const builtins = new Set(builtinModules);
    const dev = [...imports('src'), ...imports('cli')].filter(
      (i) =>
        i.to === null &&
        !i.spec.startsWith('node:') &&
        !builtins.has(i.spec) &&
        pkg.dependencies[packageName(i.spec)] === undefined,
    );
    expect(dev.map((i) => `${i.file}: ${i.spec}`)).toEqual([]);
  });
});
