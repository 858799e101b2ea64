// The plugin config equivalent to a fleet YAML for one model (explain, the demo and the benchmark).
import type { FleetConfig } from '../config/fleet-config.js';
import { PluginConfigSchema, type PluginConfig } from '../config/plugin-config.js';
import { validateConfig } from '../config/validate.js';
import { KinferenceError } from '../core/errors.js';

/**
 * The plugin config equivalent to a fleet YAML for one model, so `explain`, the demo and the benchmark make
 * exactly the decision the plugin would make with the same settings.
 */
export function pluginConfigFromFleet(fleet: FleetConfig, model: string, source: string): PluginConfig {
  const m = Object.hasOwn(fleet.models, model) ? fleet.models[model] : undefined;
  if (!m)
    throw new KinferenceError('KINF_ERR_CONFIG', `${source}: model "${model}" is not listed under models`);
  const loraAdapters: Record<string, string> = {};
  for (const a of m.lora_adapters ?? []) loraAdapters[a] = model;
  const modelPods: Record<string, string[]> = {};
  for (const p of fleet.pods ?? []) (modelPods[p.model] ??= []).push(p.address);
  return validateConfig(
    PluginConfigSchema,
    {
      ...(fleet.router ?? {}),
      redis_url: fleet.redis_url,
      redis_cluster: fleet.redis_cluster,
      redis_cluster_nodes: fleet.redis_cluster_nodes,
      redis_sentinels: fleet.redis_sentinels,
      redis_sentinel_master: fleet.redis_sentinel_master,
      redis_sentinel_password: fleet.redis_sentinel_password,
      redis_sentinel_tls: fleet.redis_sentinel_tls,
      redis_tls_ca_file: fleet.redis_tls_ca_file,
      redis_tls_cert_file: fleet.redis_tls_cert_file,
      redis_tls_key_file: fleet.redis_tls_key_file,
      redis_tls_servername: fleet.redis_tls_servername,
      redis_key_prefix: fleet.redis_key_prefix,
      tokenizer: m.tokenizer,
      chat_template: m.chat_template,
      ...(m.default_chat_template_kwargs !== undefined
        ? { default_chat_template_kwargs: m.default_chat_template_kwargs }
        : {}),
      block_size: m.block_size,
      max_prompt_tokens: m.max_prompt_tokens,
      lora_adapters: loraAdapters,
      model_pods: modelPods,
    },
    source,
  );
}
