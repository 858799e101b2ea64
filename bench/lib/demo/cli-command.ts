// Registers `kinference demo` with the CLI; the demo loads only when run.
import type { Command } from 'commander';
import { KinferenceError } from '../../../src/core/errors.js';
import type { DemoOptions } from './run-demo.js';

function positiveInt(name: string): (v: string) => number {
  return (v) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1)
      throw new KinferenceError('KINF_ERR_CONFIG', `--${name}: expected a positive integer, got "${v}"`);
    return n;
  };
}

/** `kinference demo`: registered by the composition root (cli/main.ts); the demo loads only when run. */
export function registerDemo(program: Command): void {
  program
    .command('demo')
    .description(
      'run a local fleet (Redis, 3 emulated vLLM pods, collector, Kong stand-in + plugin) and compare random routing with kinference on a shared-prefix workload',
    )
    .option(
      '--time-scale <n>',
      'how much faster than real time the emulated pods run',
      (v) => {
        const n = Number(v);
        if (!(n > 0))
          throw new KinferenceError('KINF_ERR_CONFIG', `--time-scale: expected a number > 0, got "${v}"`);
        return n;
      },
      4,
    )
    .option(
      '--requests <n>',
      'measured requests per arm (after 2 × concurrency warm-up requests)',
      positiveInt('requests'),
      96,
    )
    .option('--concurrency <n>', 'requests in flight at once', positiveInt('concurrency'), 8)
    .option(
      '--prefixes <n>',
      'distinct shared system prompts (more than one pod can cache)',
      positiveInt('prefixes'),
      16,
    )
    .option('--prefix-tokens <n>', 'tokens per shared system prompt', positiveInt('prefix-tokens'), 10000)
    .option('--otlp-endpoint <url>', 'export decision spans here, e.g. http://localhost:4318/v1/traces')
    .option('--seed <n>', 'workload seed', positiveInt('seed'), 7)
    .option(
      '--log-file <path>',
      "append the fleet's logs (emulator, collector, gateway) here (default: a new file in the temporary directory, printed)",
    )
    .action(
      async ({ logFile, ...opts }: Omit<DemoOptions, 'redisUrl' | 'childLog'> & { logFile?: string }) => {
        const { preflight } = await import('./preflight.js');
        const redisUrl = await preflight();
        const { runDemo } = await import('./run-demo.js');
        await runDemo({
          ...opts,
          ...(redisUrl ? { redisUrl } : {}),
          ...(logFile ? { childLog: logFile } : {}),
        });
      },
    );
}
