// The apply Lua script: one pod's block ops in one call, exactly once per apply id, fenced by the lease.
import { KEY_SUFFIX } from '../redis-keys.js';
import { LUA_ENTRY } from './entry.js';
import { NOT_LEASE_HOLDER, luaFence } from './fence.js';

/** Replies of the apply script below 0 (0 and up: block entries changed). */
export const APPLY_REPLY = {
  /** This call (same writer, seq and part) or a later one already ran: nothing done. */
  duplicate: -1,
  /** The writes behind the floor are gone, nothing done: the record is missing (restart empty, flush), */
  missing: -2,
  /** … older than the floor (restart from an older snapshot), */
  rolledBack: -3,
  /** … or another writer's. */
  overwritten: -4,
  /**
   * Fenced call (fence.ts) and the model's writer lease holds another value: nothing done. The reply is
   * {notLeaseHolder, that value}, not a bare number.
   */
  notLeaseHolder: NOT_LEASE_HOLDER,
} as const;

/**
 * apply: one pod's ops, in order, in ONE call (the collector sends thousands of block ops a second).
 *
 * KEYS[1] = <base>pods     HASH podId → "idx:epoch" (a new pod gets an index here, unregistered)
 * KEYS[2] = <base>seq      STRING, INCR hands out pod indexes, never reused
 * KEYS[3] = <base>applied  HASH podId → "writer:seq:part", the last call that ran for the pod
 * KEYS[4] = <base>writer   STRING the writer lease; only in a fenced call (fence.ts)
 * ARGV[1] = <base>, ARGV[2] = podId, ARGV[3] = block TTL in seconds (0 = none)
 * ARGV[4] = writer, ARGV[5] = seq, ARGV[6] = part: this call's identity (src/index/apply-id.ts). An apply
 *           split into n calls sends parts 1..n under one (writer, seq); a retry resends the same ones.
 * ARGV[7] = floor: the last "writer:seq:part" the client saw confirmed for this pod ("" for none)
 * ARGV[8] = the lease holder value this writer expects in KEYS[4]; only in a fenced call
 * ARGV[8..] (ARGV[9..] when fenced) = pairs (op, keys): op "s0" | "s1" | "s2" stores in tier GPU | CPU |
 *             STORAGE, "r0".."r2" removes, "c" clears; keys = block keys, 8 raw bytes each, concatenated
 *             ("" for "c")
 * Reply:   number of block entries changed, or an APPLY_REPLY code (< 0): nothing was written
 *          ({APPLY_REPLY.notLeaseHolder, holder value} when the fence refused the call)
 *
 * Exactly once: a call whose (writer, seq, part) is not past the pod's record is a retry of one that ran
 * (its reply was lost to a timeout or a dropped connection) and does nothing; otherwise it runs and
 * becomes the record, in the same atomic step. Lost writes: the record must be the floor, a later call
 * of the floor's writer, or an earlier part of this apply; if Redis lost it (restarted empty or from an older snapshot, flushed), the call
 * writes nothing and says why, and the client rebuilds the pod.
 *
 * Fenced (the collector's calls, fence.ts): the writer lease is checked before everything else, so a
 * refused call changes nothing, not even the record. The lost-write check alone does not stop a writer
 * that lost its lease: its first apply after a clear or a loss carries no floor.
 *
 * Atomic because Redis runs a script alone: a lookup sees the batch entirely or not at all, and two
 * collectors cannot interleave increments. A refcount is a read-modify-write of the block's value, which
 * is only safe inside a script. `clear` bumps the pod's epoch (O(1)); entries with an old epoch, or of a
 * pod no longer in KEYS[1], are dropped whenever a store or remove passes their block (lazy cleanup);
 * the TTL, refreshed on store (SET … EX), removes the rest. Two commands per block: GET, then SET or DEL.
 */
export const APPLY_LUA = `-- kinference apply. KEYS[1] = <base>pods, KEYS[2] = <base>seq, KEYS[3] = <base>applied,
-- [KEYS[4] = <base>writer]; ARGV[1] = <base>, ARGV[2] = pod id, ARGV[3] = block TTL s, ARGV[4..6] = writer,
-- seq, part, ARGV[7] = floor, [ARGV[8] = lease holder], then (op, keys) pairs. Atomic as every script:
-- lookups see all of a batch or none.
${luaFence(4, 8)}
${LUA_ENTRY}
local base, pod_id, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local writer, aseq, part, floor = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local block = base .. '${KEY_SUFFIX.block}'

-- "writer:seq:part" -> writer, seq, part (nil if absent or malformed)
local function record(v)
  if not v then return nil end
  local w, s, p = string.match(v, '^([^:]+):(%d+):(%d+)$')
  if not w then return nil end
  return w, tonumber(s), tonumber(p)
end
local rw, rs, rp = record(redis.call('HGET', KEYS[3], pod_id))
-- the record is an earlier part (or an earlier try) of this very apply: it ran after the floor
local same_apply = rw == writer and rs == aseq
if floor ~= '' and not same_apply then
  local fw, fs, fp = record(floor)
  if not rw then return ${APPLY_REPLY.missing} end
  if rw ~= fw then return ${APPLY_REPLY.overwritten} end
  if rs < fs or (rs == fs and rp < fp) then return ${APPLY_REPLY.rolledBack} end
end
if rw == writer and (rs > aseq or (same_apply and rp >= part)) then return ${APPLY_REPLY.duplicate} end
redis.call('HSET', KEYS[3], pod_id, writer .. ':' .. ARGV[5] .. ':' .. ARGV[6])
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

local changed = 0
for a = fenced and 9 or 8, #ARGV, 2 do
  local op, keys = ARGV[a], ARGV[a + 1]
  if op == 'c' then
    epoch = epoch + 1
    redis.call('HSET', KEYS[1], pod_id, idx .. ':' .. string.format('%.0f', epoch))
    live[idx] = epoch % EP
  else
    local store, t = string.sub(op, 1, 1) == 's', tonumber(string.sub(op, 2)) + 1
    for off = 1, #keys, 8 do
      local k = block .. string.sub(keys, off, off + 7)
      local old = redis.call('GET', k)
      -- entries in their stored order (equal blocks keep equal strings: the lookup memoises on them);
      -- ours decoded and its slot remembered; stale ones dropped
      local list, mine, at, dropped = {}, nil, nil, false
      if old then
        for f, v in string.gmatch(old, ENTRY_PATTERN) do
          local e, num = live[f], tonumber(v)
          if e == nil or entry_epoch(num) ~= e then
            dropped = true
          else
            list[#list + 1] = f .. '=' .. v
            if f == idx then mine, at = num, #list end
          end
        end
      end
      local rc = { 0, 0, 0 }
      if mine then rc[1], rc[2], rc[3] = entry_counts(mine) end
      local write = dropped
      if store then
        rc[t] = math.min(RCMAX, rc[t] + 1)
        write = true
        changed = changed + 1
      elseif rc[t] > 0 then
        rc[t] = rc[t] - 1
        write = true
        changed = changed + 1
      end
      if write then
        local entry = nil
        if rc[1] + rc[2] + rc[3] > 0 then entry = idx .. '=' .. entry_pack(rc[1], rc[2], rc[3], epoch) end
        if at then
          if entry then list[at] = entry else table.remove(list, at) end
        elseif entry then
          list[#list + 1] = entry
        end
        if #list == 0 then
          redis.call('DEL', k)
        elseif store and ttl > 0 then
          redis.call('SET', k, table.concat(list, ','), 'EX', ttl)
        else
          redis.call('SET', k, table.concat(list, ','), 'KEEPTTL')
        end
      end
    end
  end
end
return changed
`;
