// The parse step: the body as a chat request, and the served base model and LoRA adapter it names.
import type { FallbackReason } from '../../core/fallback.js';
import { parseChatBody, type ChatRequest } from '../../core/request.js';
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

export type ParsedRequest =
  | ({ ok: true; request: ChatRequest } & ServedModel)
  | { ok: false; reason: FallbackReason; detail: string; model: string | null; lora: string | null };

/**
 * The parse step: the body as a chat request (core/request.ts), and the model it is for. A body that is not
 * one is a fallback reason, with its model when the body named one (for the span and the load-only route).
 */
export function parseRequest(
  body: Uint8Array | string,
  config: Pick<PluginConfig, 'max_body_bytes' | 'lora_adapters'>,
): ParsedRequest {
  const parsed = parseChatBody(body, config.max_body_bytes);
  if (!parsed.ok) {
    const served =
      parsed.model === undefined ? { model: null, lora: null } : servedModel(config, parsed.model);
    return { ok: false, reason: parsed.reason, detail: parsed.detail, ...served };
  }
  return { ok: true, request: parsed.request, ...servedModel(config, parsed.request.model) };
}
