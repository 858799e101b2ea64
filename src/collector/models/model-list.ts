// A pod's context window from its OpenAI /v1/models answer (vLLM's ModelCard.max_model_len), bounded reads.
import { isRecord } from '../../core/is-record.js';

/** Largest /v1/models body read: a card is ~400 bytes, so thousands of LoRA adapters still fit. */
export const MODEL_LIST_MAX_BYTES = 1 << 20;
/** Cards looked at, at most (a body of tiny cards cannot make the parse loop long). */
export const MODEL_LIST_MAX_CARDS = 10_000;
/** A max_model_len above this is not a context window (vLLM's largest are ~10M tokens). */
export const MAX_MODEL_LEN_LIMIT = 1 << 30;

/** What a /v1/models body says of the pod's context window. */
export type ModelListWindow =
  | {
      ok: true;
      /** The window for the model, null when no card carries one (an older server, not vLLM). */
      maxModelLen: number | null;
      /** A card's id is the model: false when the value comes from a card of another served name. */
      matched: boolean;
    }
  | { ok: false; problem: string };

const windowOf = (card: Record<string, unknown>): number | null => {
  const v = card.max_model_len;
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 1 && v <= MAX_MODEL_LEN_LIMIT ? v : null;
};

/**
 * The context window of `model` from a /v1/models body (`{"object":"list","data":[ModelCard, …]}`): the
 * card whose id is the model, else the smallest of the cards that carry one (vLLM gives each served name the
 * engine's max_model_len; LoRA adapters' cards carry none). Never throws: a body that is not such a list is
 * a problem, not an error.
 */
export function modelListWindow(text: string, model: string): ModelListWindow {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { ok: false, problem: 'not JSON' };
  }
  if (!isRecord(body) || !Array.isArray(body.data))
    return { ok: false, problem: 'not a model list (no "data" array)' };
  let own: number | null = null;
  let least: number | null = null;
  for (const card of body.data.slice(0, MODEL_LIST_MAX_CARDS)) {
    if (!isRecord(card)) continue;
    const w = windowOf(card);
    if (w === null) continue;
    if (card.id === model) own = own === null ? w : Math.min(own, w);
    least = least === null ? w : Math.min(least, w);
  }
  return own !== null
    ? { ok: true, maxModelLen: own, matched: true }
    : { ok: true, maxModelLen: least, matched: false };
}

/** A response body as text, at most `maxBytes` (more: an error, the rest is not read). */
export async function readBounded(res: Response, maxBytes: number): Promise<string> {
  const declared = Number(res.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > maxBytes) {
    await res.body?.cancel();
    throw new Error(`response of ${declared} bytes, over ${maxBytes}`);
  }
  if (!res.body) return '';
  const reader = res.body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel();
      throw new Error(`response over ${maxBytes} bytes`);
    }
    parts.push(value);
  }
  return Buffer.concat(parts).toString('utf8');
}
