// Registers `kinference emulator` (serve a fleet file's pods as emulated vLLM) with the CLI.
import type { Command } from 'commander';
import { failedListenAddress, listenError } from '../src/util/listen-failure.js';
import type { RunEmulatorOptions } from './run.js';

/** `kinference emulator`: registered by cli/main.ts (the composition root); loads the emulator when run. */
export function registerEmulator(program: Command): void {
  program
    .command('emulator')
    .description('serve every pod of a fleet file as an emulated vLLM pod (OpenAI API, /metrics, KV events)')
    .requiredOption('--config <file.yaml>', 'fleet configuration (models, pods, optional emulator: section)')
    .option('--pod <id...>', 'serve only these pods (repeatable; default: all)')
    .option('--profile <name>', 'override emulator.profile (l40s-27b-fp8, h100-27b-fp8)')
    .option('--time-scale <x>', 'override emulator.time_scale (10 = ten times faster)', Number)
    .option('--seed <n>', 'override emulator.seed', (v) => Number.parseInt(v, 10))
    .option('--bind-host <host>', 'listen on this host instead of each address host (e.g. 0.0.0.0)')
    .action(async (opts: RunEmulatorOptions) => {
      const { runEmulator } = await import('./run.js');
      await runEmulator(opts).catch((e: unknown) => {
        // A pod's HTTP port or KV-event endpoint that cannot be bound: `kinference: <file>: <address>: …`.
        throw listenError(`${opts.config}: ${failedListenAddress(e) ?? 'listen'}`, e);
      });
    });
}
