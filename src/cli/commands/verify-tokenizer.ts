// Registers `kinference verify-tokenizer` (our token ids against each pod's vLLM /tokenize).
import { Option, type Command } from 'commander';

export function registerVerifyTokenizer(program: Command): void {
  program
    .command('verify-tokenizer')
    .description(
      "compare our template + tokenizer token ids with each pod's vLLM /tokenize (exit 1 on mismatch)",
    )
    .requiredOption('--config <file.yaml>', 'fleet configuration (models, pods)')
    .option('--pod <id>', 'check only this pod (default: the first pod of each model)')
    .option('--body <request.json>', 'a chat-completions body to check instead of the built-in samples')
    // Choices: a typo such as `--format tabel` is an error, not silently JSON.
    .addOption(
      new Option('--format <json|table>', 'report format on stdout')
        .choices(['json', 'table'])
        .default('json'),
    )
    .action(async (opts: { config: string; pod?: string; body?: string; format: string }) => {
      const { verifyTokenizer, formatTable } = await import('../verify-tokenizer-report.js');
      const results = await verifyTokenizer(opts);
      const ok = results.length > 0 && results.every((r) => r.match);
      console.log(opts.format === 'table' ? formatTable(results) : JSON.stringify({ ok, results }, null, 2));
      if (!ok) process.exitCode = 1;
    });
}
