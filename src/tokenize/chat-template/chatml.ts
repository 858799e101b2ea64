// The built-in `chatml` chat template (Qwen-style ChatML, text only).
import type { ChatRequest } from '../../core/request.js';
import type { ChatTemplate } from '../types.js';
import { templateConversation } from './vllm-conversation.js';

/**
 * Qwen-style ChatML: `<|im_start|>role\ncontent<|im_end|>\n` per message, then `<|im_start|>assistant\n`.
 * Text only: tools and tool calls are not rendered (use an `hf:` template for a model's full format).
 */
export function createChatmlTemplate(): ChatTemplate {
  return {
    spec: 'chatml',
    render(req: ChatRequest): string {
      let out = '';
      // Neither names the developer role: vLLM hands such a template developer messages as system ones.
      const messages = templateConversation(req, 'string', false).messages;
      const last = messages.length - 1;
      messages.forEach((m, i) => {
        out += `<|im_start|>${String(m.role)}\n${String(m.content)}`;
        // continue_final_message leaves the last message open for the model to extend.
        if (!(req.continueFinalMessage && i === last)) out += '<|im_end|>\n';
      });
      if (req.addGenerationPrompt && !req.continueFinalMessage) out += '<|im_start|>assistant\n';
      return out;
    },
  };
}
