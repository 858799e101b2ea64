// The composition root of `kinference` (bin/kinference.js runs it, built as dist/cli/main.js): the library's
// product commands from src/cli, and the commands of the tools built on the library, each defined beside its
// tool. It lives outside src/ because the library imports nothing above it (docs/architecture.md, "Layout").
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import {
  createProgram,
  registerCollector,
  registerExplain,
  registerUsage,
  registerValidate,
  registerVerifyTokenizer,
  runProgram,
} from '../src/cli/index.js';

type Register = (program: Command) => void;

/**
 * A tool's command, or null when the tool is not installed: the runtime image ships the library without
 * bench/, emulator/ and kong/stand-in (docs/deployment.md). Only the command module itself being absent
 * counts; any other failure to load it (a missing import inside it, a syntax error) is thrown.
 */
async function toolCommand(specifier: string, load: () => Promise<Register>): Promise<Register | null> {
  const url = new URL(specifier, import.meta.url);
  try {
    return await load();
  } catch (e) {
    const err = e as { code?: unknown; url?: unknown; message?: unknown };
    const missing =
      err.code === 'ERR_MODULE_NOT_FOUND' &&
      (err.url === url.href || String(err.message).includes(`'${fileURLToPath(url)}'`));
    if (missing) return null;
    throw e;
  }
}

const [demo, emulator, gateway] = await Promise.all([
  toolCommand(
    '../bench/lib/demo/cli-command.js',
    async () => (await import('../bench/lib/demo/cli-command.js')).registerDemo,
  ),
  toolCommand(
    '../emulator/cli-command.js',
    async () => (await import('../emulator/cli-command.js')).registerEmulator,
  ),
  toolCommand(
    '../kong/stand-in/cli-command.js',
    async () => (await import('../kong/stand-in/cli-command.js')).registerGateway,
  ),
]);

const program = createProgram();
// Alphabetical, as `kinference --help` lists them.
registerCollector(program);
demo?.(program);
emulator?.(program);
registerExplain(program);
gateway?.(program);
registerUsage(program);
registerValidate(program);
registerVerifyTokenizer(program);

await runProgram(program, process.argv);
