#!/usr/bin/env node
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// The composition root (cli/main.ts, built): the library's commands and those of the tools beside it.
const main = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
if (!existsSync(main)) {
  console.error('kinference is not built yet: run `npm run build` (or `npm start` for the demo).');
  process.exit(1);
}
await import(main);
