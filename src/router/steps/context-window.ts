// The context-window step: the model's window from the lookup's pods, and a prompt found longer than it.
import type { PodLookup } from '../../core/types.js';
import type { RouterMemory } from '../memory.js';
import { StepFallback } from './step-fallback.js';

/**
 * After the lookup: takes the max_model_len the model's pods report (the next requests are cut at it), and
 * falls back (context_window_exceeded) when this prompt is longer than the model's window. A prompt cut at
 * a window it already knew never is; this catches the one prepared before its model's pods were looked up,
 * or before they reported a smaller window.
 */
export function checkContextWindow(
  memory: Pick<RouterMemory, 'windows'>,
  model: string,
  pods: readonly PodLookup[],
  promptTokens: number,
): StepFallback | null {
  const window = memory.windows.learn(model, pods);
  if (window === undefined || promptTokens <= window) return null;
  return new StepFallback(
    'context_window_exceeded',
    `prompt over ${window} tokens, max_model_len of ${model} (its pods' /v1/models)`,
    window,
  );
}
