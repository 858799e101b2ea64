// `kinference validate <file…>`: kinference plugin entries checked offline, for CI next to `deck validate`.
// Kong declarative files, KongPlugin manifests and fleet files, with the plugin's own schema (validate-file.ts).
import { Option, type Command } from 'commander';

export function registerValidate(program: Command): void {
  program
    .command('validate')
    .description(
      'check every kinference plugin entry of a decK/Kong declarative file, a KongPlugin manifest or a fleet ' +
        'file offline, with the plugin schema (exit 1 on any problem)',
    )
    .argument('<file...>', 'kong.yaml / kong.json (decK), a KongPlugin manifest, or a fleet file')
    .addOption(
      new Option('--kind <kind>', 'the kind of file, when detection is not wanted').choices([
        'kong',
        'kic',
        'fleet',
      ]),
    )
    .option(
      '--check-files',
      'also load the tokenizer and chat template files (and read the Redis TLS files) the config names. Off by ' +
        'default: they are paths on the gateway (relative to its working directory) or models in its Hugging ' +
        'Face cache, not where CI runs; use it on the gateway host or in its image',
    )
    .option('--json', 'print the report as JSON on stdout (for CI)')
    .action(
      async (
        files: string[],
        opts: { kind?: 'kong' | 'kic' | 'fleet'; checkFiles?: boolean; json?: boolean },
      ) => {
        const { validateFile, formatReport } = await import('../validate-file.js');
        const reports = [];
        for (const file of files)
          reports.push(await validateFile(file, { kind: opts.kind, checkFiles: opts.checkFiles === true }));
        const ok = reports.every((r) => r.problems.length === 0);
        if (opts.json) console.log(JSON.stringify({ ok, files: reports }, null, 2));
        else
          for (const r of reports) {
            const { problems, summary } = formatReport(r);
            for (const line of problems) console.error(line);
            (r.problems.length === 0 ? console.log : console.error)(summary);
          }
        if (!ok) process.exitCode = 1;
      },
    );
}
