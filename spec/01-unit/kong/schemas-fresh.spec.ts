import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { renderSchemaFiles, staleSchemaFiles } from '../../../scripts/gen-schemas.js';

/** schemas/ is generated from src/config/plugin-config.ts; this fails when someone forgot `npm run gen:schemas`. */
describe('generated schemas', () => {
  it('are fresh (run `npm run gen:schemas` after changing src/config/plugin-config.ts)', () => {
    expect(staleSchemaFiles()).toEqual([]);
  });

  it('say they are generated, and the JSON ones parse', () => {
    const files = renderSchemaFiles();
    expect(Object.keys(files).sort()).toEqual([
      'docs/configuration.md',
      'schemas/kinference.kong-schema.json',
      'schemas/kinference.schema.lua',
      'schemas/plugin-config.schema.json',
    ]);
    const root = join(import.meta.dirname, '../../..');
    const kong = JSON.parse(readFileSync(join(root, 'schemas/kinference.kong-schema.json'), 'utf8')) as {
      name: string;
    };
    expect(kong.name).toBe('kinference');
    const json = JSON.parse(readFileSync(join(root, 'schemas/plugin-config.schema.json'), 'utf8')) as {
      $comment: string;
    };
    expect(json.$comment).toMatch(/do not edit/);
    expect(files['schemas/kinference.schema.lua']).toMatch(
      /^-- Generated from src\/config\/plugin-config\.ts/,
    );
  });

  it('detects a stale file', () => {
    expect(staleSchemaFiles('/nonexistent-root')).toHaveLength(4);
  });
});
