import { PluginConfigSchema, type PluginConfig } from '../../../src/config/plugin-config.js';
import { validateConfig } from '../../../src/config/validate.js';
import { obj, readYaml, type Obj } from './repo.js';

/** kong/kong.yaml as parsed YAML. */
export function kongYaml(): Obj {
  return obj(readYaml('kong/kong.yaml'), 'kong/kong.yaml');
}

export function kongServices(doc: Obj = kongYaml()): Obj[] {
  return (doc.services as unknown[]).map((s, i) => obj(s, `services[${i}]`));
}

export function kongRoutes(svc: Obj): Obj[] {
  return ((svc.routes as unknown[] | undefined) ?? []).map((r, i) => obj(r, `routes[${i}]`));
}

/** The route carrying the kinference plugin, its service and the plugin's raw config. */
export function kinferenceRoute(doc: Obj = kongYaml()): { service: Obj; route: Obj; config: Obj } {
  for (const service of kongServices(doc))
    for (const route of kongRoutes(service))
      for (const p of (route.plugins as unknown[] | undefined) ?? []) {
        const plugin = obj(p, 'plugin');
        if (plugin.name === 'kinference')
          return { service, route, config: obj(plugin.config ?? {}, 'config') };
      }
  throw new Error('kong/kong.yaml: no route has the kinference plugin');
}

/** The plugin config of kong/kong.yaml, validated against PluginConfigSchema with defaults filled in. */
export function kinferencePluginConfig(): PluginConfig {
  return validateConfig(PluginConfigSchema, kinferenceRoute().config, 'kong/kong.yaml kinference config');
}
