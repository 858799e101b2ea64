// Builds (scripts/build.mjs) only when a source changed since the last build, so that `npm start` and
// `npm run bench:*` reach their command in well under a second when nothing did (a full build takes ~30 s).
import { execFileSync } from 'node:child_process';
import { isStale } from './build-stamp.mjs';

if (isStale()) {
  console.error('kinference: sources changed since the last build: building (about 30 s)…');
  execFileSync(process.execPath, ['scripts/build.mjs'], { stdio: 'inherit' });
}
