import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';

/**
 * The index's one entry is src/index/index.ts: nothing outside src/index imports a module past it (the
 * `../index/x.js` of src/*, the `../src/index/x.js` of the tools and specs).
 */
const indexEntryOnly = {
  regex: String.raw`^(\.\.?/)+(src/)?index/(?!index\.js$)`,
  message: 'Import the index from src/index/index.ts, its only entry (docs/architecture.md).',
};

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'node_modules/**',
      'schemas/**',
      'bench/results/**',
      'spec/fixtures/**',
      '.tmp/**',
      'coverage/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-console': 'off',
    },
  },
  {
    files: ['**/*.ts'],
    ignores: [
      'src/index/**',
      // White-box tests and measurements of the index itself: they read its Redis layout, scripts and
      // argument builders, which are not part of its API.
      'spec/01-unit/index/**',
      'spec/02-integration/redis/**',
      'spec/03-e2e/collector/writer-lease.spec.ts',
      'bench/collector.ts',
    ],
    rules: { 'no-restricted-imports': ['error', { patterns: [indexEntryOnly] }] },
  },
  {
    // Core stays pure: no I/O modules. (A file's no-restricted-imports is its last matching block's, so
    // this one repeats the index rule.)
    files: ['src/core/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: [
                'node:fs',
                'node:net',
                'node:http',
                'ioredis',
                'zeromq',
                '@opentelemetry/*',
                'fs',
                'net',
              ],
            },
            indexEntryOnly,
          ],
        },
      ],
    },
  },
);
