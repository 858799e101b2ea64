#!/usr/bin/env node
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const main = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));
if (!existsSync(main)) {
  console.error('kinference is not built yet: run `npm run build` (or `npm start` for the demo).');
  process.exit(1);
}
await import(main);
