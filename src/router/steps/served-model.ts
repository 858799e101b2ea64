// The served base model and LoRA adapter a requested model name names (config.lora_adapters).
import type { PluginConfig } from '../../config/plugin-config.js';
import { configEntry } from '../config-entry.js';

/** The base model the pods serve for a requested name, and the LoRA adapter when the name is one. */
export interface ServedModel {
  model: string;
  lora: string | null;
}

export function servedModel(config: Pick<PluginConfig, 'lora_adapters'>, requested: string): ServedModel {
  const base = configEntry(config.lora_adapters, requested);
  return { model: base ?? requested, lora: base ? requested : null };
}
