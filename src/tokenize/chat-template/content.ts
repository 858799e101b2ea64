import type { ChatMessage } from '../../core/request.js';

/**
 * A message's text. vLLM's "string" content format joins text parts with "\n"
 * (`_parse_chat_message_content_parts`); null content becomes "".
 */
export function messageText(content: ChatMessage['content'], joiner = '\n'): string {
  if (content === null) return '';
  if (typeof content === 'string') return content;
  return content.map((p) => p.text).join(joiner);
}
