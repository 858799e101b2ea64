// The environment nginx leaves its workers, and so the plugin server Kong spawns (nginx_main_env).
/**
 * The environment nginx leaves its worker processes, and so the plugin server Kong spawns from worker 0
 * (ngx.pipe, kong.md §4.1): nginx removes every inherited variable but TZ and those its `env` directives
 * name. Kong writes those from `nginx_main_env` (KONG_NGINX_MAIN_ENV, one injected directive: "A" or
 * "A=value"; several as "A; env B", the directive's own separator). So a variable set on Kong's container
 * reaches the plugin only when declared there.
 */
export function nginxWorkerEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  if (env.TZ !== undefined) out.TZ = env.TZ;
  const declared = env.KONG_NGINX_MAIN_ENV;
  if (!declared) return out;
  for (const part of declared.split(/;\s*env\s+/)) {
    const item = part.trim().replace(/;$/, '');
    if (!item) continue;
    const eq = item.indexOf('=');
    if (eq > 0) out[item.slice(0, eq)] = item.slice(eq + 1);
    else if (env[item] !== undefined) out[item] = env[item];
  }
  return out;
}
