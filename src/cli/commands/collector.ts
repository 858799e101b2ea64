// Registers `kinference collector` (follow the fleet's KV events and metrics into the index).
import type { Command } from 'commander';

export function registerCollector(program: Command): void {
  program
    .command('collector')
    .description('follow vLLM KV-cache events and metrics of every pod and keep the Redis index true')
    .requiredOption(
      '--config <file.yaml>',
      'fleet configuration (models, pods or kubernetes, redis_url, collector)',
    )
    .action(async (opts: { config: string }) => {
      const { runCollector } = await import('../../collector/run.js');
      await runCollector(opts.config);
    });
}
