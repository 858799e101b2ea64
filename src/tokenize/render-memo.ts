// The rendered prompts of long bodies, per template and bounded: the same long body again skips the render.
import { bodyDigest, type ChatRequest } from '../core/request.js';
import { BytesLru } from '../util/bytes-lru.js';
import type { ChatTemplate } from './types.js';

/**
 * Bytes of rendered prompts kept per template (per thread: the event loop and each decision worker keep
 * their own). Keyed by core/request.ts bodyDigest, which only long bodies get.
 */
export const RENDER_MEMO_BYTES = 16 << 20;
const memos = new WeakMap<ChatTemplate, BytesLru<string>>();

/**
 * `template.render(request)`, remembered for long bodies (a retry, a client sending the same context again
 * skips the Jinja render). Only templates without a clock (`pure`): one that reads the date renders anew.
 */
export function renderMemoized(template: ChatTemplate, request: ChatRequest): string {
  const digest = template.pure === true ? bodyDigest(request) : null;
  if (digest === null) return template.render(request);
  let memo = memos.get(template);
  if (memo === undefined) memos.set(template, (memo = new BytesLru<string>(RENDER_MEMO_BYTES)));
  const known = memo.get(digest);
  if (known !== undefined) return known;
  const rendered = template.render(request);
  memo.set(digest, rendered, 2 * rendered.length + 256);
  return rendered;
}
