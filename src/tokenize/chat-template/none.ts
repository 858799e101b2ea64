// The built-in `none` chat template: the messages' text concatenated.
import type { ChatRequest } from '../../core/request.js';
import type { ChatTemplate } from '../types.js';
import { messageText } from './content.js';

/** No template: the messages' text concatenated (for completion-style models behind a chat route). */
export function createNoneTemplate(): ChatTemplate {
  return {
    spec: 'none',
    render: (req: ChatRequest): string => req.messages.map((m) => messageText(m.content)).join(''),
  };
}
