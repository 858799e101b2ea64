// The upsert-pod and remove-pod Lua scripts: a pod's state record, its registration and its removal.
import { KEY_SUFFIX } from '../redis-keys.js';
import { LUA_ENTRY } from './entry.js';
import { luaFence } from './fence.js';

/**
 * upsert-pod: merge state fields into the pod's state record, registering the pod (and giving it an index)
 * if new. The record is one string of "field=value\n" lines (values escaped by the client, see
 * src/index/pod-state-codec.ts): the lookup reads every pod's record with one MGET and returns it whole.
 *
 * KEYS[1] = <base>pods   HASH podId → "idx:epoch"
 * KEYS[2] = <base>seq    STRING, INCR hands out pod indexes
 * KEYS[3] = <base>writer STRING the writer lease; only in a fenced call (fence.ts)
 * ARGV[1] = <base>, ARGV[2] = podId, [ARGV[3] = lease holder value, fenced only], then state field,
 *           value pairs ("id" first, always present)
 * Reply:   the pod's index, or {APPLY_REPLY.notLeaseHolder, holder value}: the fence refused, nothing done
 *
 * Atomic: index allocation and the first state write happen together, so a concurrent lookup never sees
 * a registered pod without an index, and two writers cannot hand out the same index.
 */
export const UPSERT_POD_LUA = `-- kinference upsert-pod. KEYS[1] = <base>pods, KEYS[2] = <base>seq, [KEYS[3] = <base>writer];
-- ARGV[1] = <base>, ARGV[2] = pod id, [ARGV[3] = lease holder], then state field/value pairs. Atomic:
-- index allocation and first state write together.
${luaFence(3, 3)}
${LUA_ENTRY}
local base, pod_id = ARGV[1], ARGV[2]
local idx
local ref = redis.call('HGET', KEYS[1], pod_id)
if ref then
  idx = pod_ref(ref)
else
  idx = tostring(redis.call('INCR', KEYS[2]))
  redis.call('HSET', KEYS[1], pod_id, idx .. ':0')
end
local key = base .. '${KEY_SUFFIX.state}' .. idx
local order, vals = {}, {}
local cur = redis.call('GET', key)
if cur then
  for f, v in string.gmatch(cur, '([^=\\n]+)=([^\\n]*)\\n') do
    if vals[f] == nil then order[#order + 1] = f end
    vals[f] = v
  end
end
for i = fenced and 4 or 3, #ARGV, 2 do
  local f = ARGV[i]
  if vals[f] == nil then order[#order + 1] = f end
  vals[f] = ARGV[i + 1]
end
local lines = {}
for i, f in ipairs(order) do lines[i] = f .. '=' .. vals[f] .. '\\n' end
redis.call('SET', key, table.concat(lines))
return tonumber(idx)
`;

/**
 * remove-pod: forget a pod that left the fleet.
 *
 * KEYS[1] = <base>pods, KEYS[2] = <base>applied, [KEYS[3] = <base>writer, fenced only]
 * ARGV[1] = <base>, ARGV[2] = podId, [ARGV[3] = lease holder value, fenced only]
 * Reply:   1 if the pod was known, else 0; {APPLY_REPLY.notLeaseHolder, holder value}: the fence refused
 *
 * O(1): deletes the pod's index mapping, its state, its apply record and any collector handoff (handoff.ts).
 * Its block entries become stale
 * at once (their index is no longer live and is never handed out again), are dropped lazily by apply, and
 * expire by TTL.
 */
export const REMOVE_POD_LUA = `-- kinference remove-pod. KEYS[1] = <base>pods, KEYS[2] = <base>applied, [KEYS[3] = <base>writer];
-- ARGV[1] = <base>, ARGV[2] = pod id, [ARGV[3] = lease holder]. O(1) and atomic: mapping, state and apply
-- record go together; the blocks become stale.
${luaFence(3, 3)}
${LUA_ENTRY}
local base, pod_id = ARGV[1], ARGV[2]
redis.call('HDEL', KEYS[2], pod_id)
local ref = redis.call('HGET', KEYS[1], pod_id)
if not ref then return 0 end
local idx = pod_ref(ref)
redis.call('HDEL', KEYS[1], pod_id)
redis.call('DEL', base .. '${KEY_SUFFIX.state}' .. idx, base .. '${KEY_SUFFIX.handoff}' .. idx,
  base .. '${KEY_SUFFIX.handoffStamp}' .. idx)
return 1
`;
