// Registers `kinference usage` (the usage records per tenant, model and hour, from the fleet's Redis).
import type { Command } from 'commander';

export function registerUsage(program: Command): void {
  program
    .command('usage')
    .description('print the usage records (requests, tokens, cache, TTFT, cost) per tenant, model or hour')
    .requiredOption('--config <file.yaml>', 'fleet configuration (its redis_url and redis_key_prefix)')
    .option('--from <time>', 'start: ISO 8601 (2026-12-06, 2026-12-06T10:00Z) or a time ago (24h, 7d)', '24h')
    .option('--to <time>', 'end, included: ISO 8601 or a time ago (default: now)')
    .option('--by <keys>', 'group by tenant, model and/or hour, comma-separated', 'tenant,model')
    .option('--format <format>', 'table, json or csv', 'table')
    .action(async (opts: { config: string; from: string; to?: string; by: string; format: string }) => {
      const { runUsage } = await import('./usage-report.js');
      await runUsage(opts);
    });
}
