// Registers `kinference explain` (the routing decision the plugin would make for a body).
import type { Command } from 'commander';

export function registerExplain(program: Command): void {
  program
    .command('explain')
    .description('print, as JSON, which pod a chat request would be routed to and why')
    .requiredOption('--config <file.yaml>', 'fleet configuration (models, pods, redis_url)')
    .requiredOption('--body <request.json>', 'an OpenAI chat-completions request body')
    .action(async (opts: { config: string; body: string }) => {
      const { runExplain } = await import('../explain-decision.js');
      await runExplain(opts.config, opts.body);
    });
}
