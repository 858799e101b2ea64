import { run } from './tools.js';

export interface RuntimePackage {
  name: string;
  private: boolean;
  type: string;
  dependencies: Record<string, string>;
}

let cached: RuntimePackage | null = null;

/** What kong/Dockerfile installs beside the plugin: the output of deploy/docker/plugin-runtime-package.mjs. */
export function runtimePackage(): RuntimePackage {
  if (cached) return cached;
  const r = run(process.execPath, ['deploy/docker/plugin-runtime-package.mjs']);
  if (r.status !== 0) throw new Error(`plugin-runtime-package.mjs failed: ${r.stderr}`);
  cached = JSON.parse(r.stdout) as RuntimePackage;
  return cached;
}
