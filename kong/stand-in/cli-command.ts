// Registers `kinference gateway` (the Kong stand-in) with the CLI; the implementation loads when run.
import type { Command } from 'commander';

/** `kinference gateway`: registered by the composition root (cli/main.ts); the implementation loads only when run. */
export function registerGateway(program: Command): void {
  program
    .command('gateway')
    .description(
      'run the Kong stand-in: serve a Kong declarative config with the kinference plugin over the real plugin server',
    )
    .requiredOption(
      '--kong-config <kong.yaml>',
      'Kong declarative config (_format_version "3.0"), as given to decK; SIGHUP reloads it',
    )
    .option('--listen <host:port>', 'proxy listen address', '127.0.0.1:8000')
    .option('--plugins-dir <dir>', 'directory holding the bundled plugin (default dist/plugins/kinference)')
    .option('--prefix <dir>', 'directory for the plugin server socket (default: a temp dir)')
    .option('--log-level <level>', 'debug | info | notice | warn | err', 'notice')
    .action(
      async (opts: {
        kongConfig: string;
        listen: string;
        pluginsDir?: string;
        prefix?: string;
        logLevel: string;
      }) => {
        const { runGateway } = await import('./cli.js');
        await runGateway(opts);
      },
    );
}
