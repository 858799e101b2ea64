import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join, resolve } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';

/** Repository root (spec/04-deploy/support → ../../..). */
export const ROOT = resolve(fileURLToPath(new URL('../../../', import.meta.url)));

export function repoPath(...parts: string[]): string {
  return join(ROOT, ...parts);
}

export function readText(rel: string): string {
  return readFileSync(repoPath(rel), 'utf8');
}

/** One YAML document; `<<` merge keys resolved (Compose files use them with anchors). */
export function readYaml(rel: string): unknown {
  return parse(readText(rel), { merge: true });
}

/** Every document of a multi-document YAML file; a syntax error in any of them throws. */
export function readYamlDocs(rel: string): unknown[] {
  return parseAllDocuments(readText(rel), { merge: true }).map((d) => {
    if (d.errors.length > 0) throw new Error(`${rel}: ${d.errors.map((e) => e.message).join('; ')}`);
    return d.toJS() as unknown;
  });
}

export function exists(rel: string): boolean {
  return existsSync(repoPath(rel));
}

export type Obj = Record<string, unknown>;

export function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Narrows `v` to an object or fails with the path that was expected to hold one. */
export function obj(v: unknown, where: string): Obj {
  if (!isObj(v)) throw new Error(`${where}: expected a map, got ${JSON.stringify(v)}`);
  return v;
}

export function strs(v: unknown, where: string): string[] {
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string'))
    throw new Error(`${where}: expected a list of strings, got ${JSON.stringify(v)}`);
  return v as string[];
}
