import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { isKinferenceError } from '../core/errors.js';
import { registerCollector } from './commands/collector.js';
import { registerDemo } from './commands/demo.js';
import { registerEmulator } from './commands/emulator.js';
import { registerExplain } from './commands/explain.js';
import { registerGateway } from '../../kong/stand-in/cli-command.js';
import { registerVerifyTokenizer } from './commands/verify-tokenizer.js';

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

const program = new Command('kinference')
  .description('KV-cache-aware load balancing for vLLM behind Kong')
  .version(packageVersion())
  .showHelpAfterError()
  .exitOverride();

registerCollector(program);
registerDemo(program);
registerEmulator(program);
registerExplain(program);
registerGateway(program);
registerVerifyTokenizer(program);

try {
  await program.parseAsync(process.argv);
} catch (e) {
  if (e instanceof CommanderError) process.exit(e.exitCode);
  if (isKinferenceError(e)) {
    console.error(`kinference: ${e.message}`);
    process.exit(2);
  }
  throw e;
}
