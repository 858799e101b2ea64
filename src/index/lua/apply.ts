import { KEY_SUFFIX } from '../redis-keys.js';
import { LUA_ENTRY } from './entry.js';

/**
 * apply: one pod's ops, in order, in ONE call (the collector sends thousands of block ops a second).
 *
 * KEYS[1] = <base>pods   HASH podId → "idx:epoch" (a new pod gets an index here, unregistered)
 * KEYS[2] = <base>seq    STRING, INCR hands out pod indexes, never reused
 * ARGV[1] = <base>, ARGV[2] = podId, ARGV[3] = block TTL in seconds (0 = none)
 * ARGV[4..] = pairs (op, keys): op "s0" | "s1" | "s2" stores in tier GPU | CPU | STORAGE, "r0".."r2"
 *             removes, "c" clears; keys = block keys, 8 raw bytes each, concatenated ("" for "c")
 * Reply:   number of block entries changed
 *
 * Atomic because Redis runs a script alone: a lookup sees the batch entirely or not at all, and two
 * collectors cannot interleave increments. Refcount = read-modify-write of one hash field, which is
 * only safe inside a script. `clear` bumps the pod's epoch (O(1)); entries with an old epoch, or of a
 * pod no longer in KEYS[1], are dropped whenever a store or remove passes their block (lazy cleanup);
 * the TTL, refreshed on store, removes the rest.
 */
export const APPLY_LUA = `${LUA_ENTRY}
local base, pod_id, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local block = base .. '${KEY_SUFFIX.block}'
local idx, epoch
local ref = redis.call('HGET', KEYS[1], pod_id)
if ref then
  idx, epoch = pod_ref(ref)
else
  idx, epoch = tostring(redis.call('INCR', KEYS[2])), 0
  redis.call('HSET', KEYS[1], pod_id, idx .. ':0')
end

-- live epoch of every known pod, for the lazy cleanup
local live = {}
local refs = redis.call('HGETALL', KEYS[1])
for i = 2, #refs, 2 do
  local x, e = pod_ref(refs[i])
  live[x] = e % EP
end

-- the pod's live entry in block key k (nil if none); drops stale fields of any pod on the way
local function own(k)
  local flat = redis.call('HGETALL', k)
  local mine, stale = nil, nil
  for j = 1, #flat, 2 do
    local f, v = flat[j], tonumber(flat[j + 1])
    local e = live[f]
    if e == nil or entry_epoch(v) ~= e then
      stale = stale or {}
      stale[#stale + 1] = f
    elseif f == idx then
      mine = v
    end
  end
  if stale then redis.call('HDEL', k, unpack(stale)) end
  return mine
end

local changed = 0
for a = 4, #ARGV, 2 do
  local op, keys = ARGV[a], ARGV[a + 1]
  if op == 'c' then
    epoch = epoch + 1
    redis.call('HSET', KEYS[1], pod_id, idx .. ':' .. string.format('%.0f', epoch))
    live[idx] = epoch % EP
  else
    local store, t = string.sub(op, 1, 1) == 's', tonumber(string.sub(op, 2)) + 1
    for off = 1, #keys, 8 do
      local k = block .. string.sub(keys, off, off + 7)
      local v = own(k)
      local rc = { 0, 0, 0 }
      if v then rc[1], rc[2], rc[3] = entry_counts(v) end
      if store then
        rc[t] = math.min(RCMAX, rc[t] + 1)
        redis.call('HSET', k, idx, entry_pack(rc[1], rc[2], rc[3], epoch))
        if ttl > 0 then redis.call('EXPIRE', k, ttl) end
        changed = changed + 1
      elseif rc[t] > 0 then
        rc[t] = rc[t] - 1
        if rc[1] + rc[2] + rc[3] == 0 then
          redis.call('HDEL', k, idx)
        else
          redis.call('HSET', k, idx, entry_pack(rc[1], rc[2], rc[3], epoch))
        end
        changed = changed + 1
      end
    end
  end
end
return changed
`;
