import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { isKinferenceError } from '../core/errors.js';
import { registerCollector } from './commands/collector.js';
import { registerDemo } from './commands/demo.js';
import { registerEmulator } from './commands/emulator.js';
import { registerExplain } from './commands/explain.js';
import { registerGateway } from '../../kong/stand-in/cli-command.js';
import { registerVerifyTokenizer } from './commands/verify-tokenizer.js';

function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  return pkg.version;
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
