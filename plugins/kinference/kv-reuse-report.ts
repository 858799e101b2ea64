// Asks vLLM to report the prefix-cache blocks a request reuses, by splicing a member into the body.
/**
 * The request body with `"vllm_xargs":{"kv_cache_report_mode":"full"}` added as its first member: vLLM
 * (PR #45261) then announces the prefix-cache blocks the request reuses as BlockStored events, so a pod's
 * index rebuilt without its whole history regains its hot blocks on their next hit. The bytes are spliced in
 * rather than the JSON re-serialized, so every other byte reaches vLLM as the client sent it (numbers such as
 * a 64-bit seed or `1.0` keep their exact text). The router asks for it only for bodies without their own
 * vllm_xargs. Returns null when the body is not a JSON object.
 */
const MEMBER = Buffer.from('"vllm_xargs":{"kv_cache_report_mode":"full"}');
const COMMA = Buffer.from(',');

function isJsonSpace(b: number): boolean {
  return b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d;
}

export function withKvReuseReport(body: Uint8Array | string): Buffer | null {
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body);
  let open = 0;
  while (open < bytes.length && isJsonSpace(bytes[open]!)) open++;
  if (bytes[open] !== 0x7b) return null;
  let next = open + 1;
  while (next < bytes.length && isJsonSpace(bytes[next]!)) next++;
  const empty = bytes[next] === 0x7d;
  const head = bytes.subarray(0, open + 1);
  const tail = bytes.subarray(open + 1);
  return Buffer.concat(empty ? [head, MEMBER, tail] : [head, MEMBER, COMMA, tail]);
}
