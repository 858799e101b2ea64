// The library's product commands, for the composition root (cli/main.ts beside bin/) to register. Nothing
// here imports outside src/: the tools' commands (demo, emulator, gateway) are registered there.
export { createProgram, runProgram } from './program.js';
export { registerCollector } from './commands/collector.js';
export { registerExplain } from './commands/explain.js';
export { registerUsage } from './commands/usage.js';
export { registerValidate } from './commands/validate.js';
export { registerVerifyTokenizer } from './commands/verify-tokenizer.js';
