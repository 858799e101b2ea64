// A message's text as vLLM's "string" content format joins its parts.
import type { ChatMessage } from '../../core/request.js';

/**
 * A message's text. vLLM's "string" content format joins text parts with "\n"
 * (`_parse_chat_message_content_parts`), keeping only the parts whose text is not empty (it appends a parsed
 * part only when it is truthy); null content becomes "". A tool_reference part is its bare name there
 * (`_parse_chat_message_content_part`), so a null or empty name adds nothing.
 */
export function messageText(content: ChatMessage['content'], joiner = '\n'): string {
  if (content === null) return '';
  if (typeof content === 'string') return content;
  return content
    .map((p) => (p.type === 'text' ? p.text : (p.name ?? '')))
    .filter((t) => t.length > 0)
    .join(joiner);
}
