import type { ChatRequest } from '../../core/request.js';
import type { ChatTemplate } from '../types.js';
import { messageText } from './content.js';

/**
 * Qwen-style ChatML: `<|im_start|>role\ncontent<|im_end|>\n` per message, then `<|im_start|>assistant\n`.
 * Text only: tools and tool calls are not rendered (use an `hf:` template for a model's full format).
 */
export function createChatmlTemplate(): ChatTemplate {
  return {
    spec: 'chatml',
    render(req: ChatRequest): string {
      let out = '';
      const last = req.messages.length - 1;
      req.messages.forEach((m, i) => {
        out += `<|im_start|>${m.role}\n${messageText(m.content)}`;
        // continue_final_message leaves the last message open for the model to extend.
        if (!(req.continueFinalMessage && i === last)) out += '<|im_end|>\n';
      });
      if (req.addGenerationPrompt && !req.continueFinalMessage) out += '<|im_start|>assistant\n';
      return out;
    },
  };
}
