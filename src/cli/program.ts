// The `kinference` commander program (name, version) and runProgram, which maps errors to exit codes.
import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { isKinferenceError } from '../core/errors.js';

/** Our package.json, found upward from this file (it runs from src/ under tsx and from dist/ when built). */
function packageVersion(): string {
  for (let dir = new URL('.', import.meta.url); ; dir = new URL('..', dir)) {
    try {
      const pkg = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8')) as {
        name?: string;
        version: string;
      };
      if (pkg.name === 'kinference') return pkg.version;
    } catch {
      /* keep looking upward */
    }
    if (dir.pathname === '/') return '0.0.0';
  }
}

/** The `kinference` program with no commands yet: the composition root (cli/main.ts) registers them. */
export function createProgram(): Command {
  return new Command('kinference')
    .description('KV-cache-aware load balancing for vLLM behind Kong')
    .version(packageVersion())
    .showHelpAfterError()
    .exitOverride();
}

/**
 * Runs the command line and sets the exit code: commander's own for usage errors, 2 for a KinferenceError
 * (printed as one line, no stack trace); anything else is a bug and is rethrown with its stack.
 */
export async function runProgram(program: Command, argv: readonly string[]): Promise<void> {
  try {
    await program.parseAsync(argv);
  } catch (e) {
    if (e instanceof CommanderError) process.exit(e.exitCode);
    if (isKinferenceError(e)) {
      console.error(`kinference: ${e.message}`);
      process.exit(2);
    }
    throw e;
  }
}
