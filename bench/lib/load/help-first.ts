// Imported first by bench/load.ts: `--help` (or no argument) answers before the modules after it evaluate
// (the load runner, the tokenizer, the progress bar; ES modules evaluate in import order).
import { LOAD_USAGE } from './options.js';

const argv = process.argv.slice(2);
if (argv.includes('--help') || argv.includes('-h') || argv.length === 0) {
  console.log(LOAD_USAGE);
  process.exit(argv.length === 0 ? 2 : 0);
}
