// Reads the collector specs' vLLM fixtures (.hex byte dumps, JSON) from spec/fixtures/vllm.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const DIR = fileURLToPath(new URL('../../fixtures/vllm/', import.meta.url));

/** A `.hex` fixture: hex byte pairs, whitespace-separated; `#` starts a comment line. */
export function readHexFixture(name: string): Buffer {
  const text = readFileSync(DIR + name, 'utf8');
  const hex = text
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .join(' ')
    .replace(/\s+/g, '');
  return Buffer.from(hex, 'hex');
}

export function readJsonFixture<T>(name: string): T {
  return JSON.parse(readFileSync(DIR + name, 'utf8')) as T;
}
