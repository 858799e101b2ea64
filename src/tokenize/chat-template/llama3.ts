// The built-in `llama3` chat template (Meta Llama 3.0).
import type { ChatRequest } from '../../core/request.js';
import type { ChatTemplate } from '../types.js';
import { templateConversation } from './vllm-conversation.js';

/**
 * Meta Llama 3 (3.0) template: `<|begin_of_text|>` then `<|start_header_id|>role<|end_header_id|>\n\n` +
 * trimmed content + `<|eot_id|>` per message, then the assistant header. Llama 3.1+ templates add a dated
 * system preamble and tool formats: serve those with `hf:<tokenizer_config.json>`.
 */
export function createLlama3Template(): ChatTemplate {
  return {
    spec: 'llama3',
    render(req: ChatRequest): string {
      let out = '<|begin_of_text|>';
      // Neither names the developer role: vLLM hands such a template developer messages as system ones.
      const messages = templateConversation(req, 'string', false).messages;
      const last = messages.length - 1;
      messages.forEach((m, i) => {
        // Jinja's `trim` (Python str.strip) applies to the content only.
        out += `<|start_header_id|>${String(m.role)}<|end_header_id|>\n\n${String(m.content).trim()}`;
        if (!(req.continueFinalMessage && i === last)) out += '<|eot_id|>';
      });
      if (req.addGenerationPrompt && !req.continueFinalMessage)
        out += '<|start_header_id|>assistant<|end_header_id|>\n\n';
      return out;
    },
  };
}
