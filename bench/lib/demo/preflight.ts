// The demo's up-front checks (the built plugin, a Redis), so a missing piece is a sentence.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { KinferenceError } from '../../../src/core/errors.js';
import { redisAnswers } from '../../../harness/redis-server.js';

/**
 * What the demo needs, checked up front so a missing piece is a sentence, not a stack trace. Returns the URL
 * of an existing Redis to use when redis-server cannot be started here, or null to start a private one.
 */
export async function preflight(): Promise<string | null> {
  const plugin = fileURLToPath(new URL('../../../plugins/kinference/kinference.js', import.meta.url));
  if (!existsSync(plugin))
    throw new KinferenceError(
      'KINF_ERR_CONFIG',
      'the plugin bundle is missing: run `npm run build` (or `npm start`).',
    );
  const pluginServer = fileURLToPath(
    new URL('../../../../node_modules/.bin/kong-js-pluginserver', import.meta.url),
  );
  if (!existsSync(pluginServer))
    throw new KinferenceError(
      'KINF_ERR_CONFIG',
      'kong-js-pluginserver is missing: run `npm ci` in the repository.',
    );
  if (spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0) return null;
  const fallback = 'redis://127.0.0.1:6379/0';
  if (await redisAnswers(fallback)) return fallback;
  throw new KinferenceError(
    'KINF_ERR_CONFIG',
    'the demo needs Redis: install redis-server (`apt-get install -y redis-server`, `brew install redis`) or start one on 127.0.0.1:6379.',
  );
}
