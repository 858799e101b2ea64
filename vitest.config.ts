import { defineConfig } from 'vitest/config';

// Two cores: keep parallelism low so process-spawning tests don't starve each other.
export default defineConfig({
  test: {
    include: ['spec/**/*.spec.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // The JSON report lets .ci/run print a plain 'N passed, N failed' closing line.
    reporters: ['default', ['json', { outputFile: '.tmp/vitest-report.json' }]],
  },
});
