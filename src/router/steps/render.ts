// The render step: the prompt text vLLM would tokenize, from the config's chat template.
import { boundedDetail } from '../../core/bounded-detail.js';
import type { ChatRequest } from '../../core/request.js';
import type { ChatTemplate } from '../../tokenize/types.js';
import { ResourceLoadingError } from '../resource-load.js';
import { StepFallback } from './step-fallback.js';

/**
 * The render step: the prompt text vLLM's chat endpoint would tokenize, from the config's chat template
 * (loaded on first use; a template that fails to load or to render falls back, template_error; one still
 * loading in the background gives tokenizer_loading, as the tokenizer does).
 */
export function renderPrompt(template: () => ChatTemplate, request: ChatRequest): string | StepFallback {
  try {
    return template().render(request);
  } catch (e) {
    return new StepFallback(
      e instanceof ResourceLoadingError ? 'tokenizer_loading' : 'template_error',
      boundedDetail(e),
    );
  }
}
