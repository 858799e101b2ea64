// The save-handoff and take-handoff Lua scripts: a stopping collector's per-pod record for the next one.
import { KEY_SUFFIX } from '../redis-keys.js';
import { LUA_ENTRY } from './entry.js';
import { luaFence } from './fence.js';

/**
 * A collector that stops cleanly leaves each pod's stream state in a handoff, so the next collector resumes
 * instead of clearing the pod (src/collector/handoff.ts). The record is only true of the index as it was
 * when saved, so it is stamped with the pod's "idx:epoch" and its apply record (`applied`): every apply that
 * runs, a clear included, writes a new apply record, and a removal drops the mapping. A take with another
 * stamp is stale.
 *
 * A record can be tens of MB (one entry per block hash), and a script runs alone on the server: copying it
 * inside one would stall every router's lookup meanwhile. So the client moves the record in 1 MB APPENDs and
 * GETRANGEs on a key of its own (`<base>ht:<token>`), and the scripts only check stamps and RENAME (O(1)):
 *   save: record → ht:<token> (APPENDs), then the script stamps it and renames it to h:<idx>;
 *   take: the script checks the stamp and renames h:<idx> to ht:<token>, then the client reads and deletes it.
 * Both are fenced writes: {APPLY_REPLY.notLeaseHolder, holder} when another collector holds the lease.
 */
const STAMP = `local function stamp(ref)
  return ref .. '|' .. (redis.call('HGET', KEYS[2], ARGV[2]) or '')
end
local function handoff_keys(ref)
  local idx = pod_ref(ref)
  return ARGV[1] .. '${KEY_SUFFIX.handoff}' .. idx, ARGV[1] .. '${KEY_SUFFIX.handoffStamp}' .. idx
end`;

/**
 * save-handoff. KEYS[1] = <base>pods, KEYS[2] = <base>applied, KEYS[3] = the client's ht:<token> holding the
 * record, [KEYS[4] = <base>writer, fenced only]; ARGV[1] = <base>, ARGV[2] = podId, ARGV[3] = ttl ms (0:
 * none), ARGV[4] = the apply record the record was taken at ('' : not checked), [ARGV[5] = lease holder].
 * Reply 1 (stored), 0 (the pod is not in the index, or no record) or 2 (the pod was written since the record
 * was taken: a write that landed between the snapshot and this script; nothing stored).
 */
export const SAVE_HANDOFF_LUA = `-- kinference save-handoff. KEYS[1] = <base>pods, KEYS[2] = <base>applied, KEYS[3] = record key,
-- [KEYS[4] = <base>writer]; ARGV[1] = <base>, ARGV[2] = pod id, ARGV[3] = ttl ms, ARGV[4] = expected apply
-- record, [ARGV[5] = lease holder]. Stamps the record with the pod's idx:epoch and apply record, and renames
-- it into place (O(1)).
${luaFence(4, 5)}
${LUA_ENTRY}
${STAMP}
local ttl = tonumber(ARGV[3])
local ref = redis.call('HGET', KEYS[1], ARGV[2])
if not ref or redis.call('EXISTS', KEYS[3]) == 0 then
  redis.call('DEL', KEYS[3])
  return 0
end
if ARGV[4] ~= '' and (redis.call('HGET', KEYS[2], ARGV[2]) or '') ~= ARGV[4] then
  redis.call('DEL', KEYS[3])
  return 2
end
local rkey, skey = handoff_keys(ref)
redis.call('RENAME', KEYS[3], rkey)
redis.call('SET', skey, stamp(ref))
if ttl > 0 then
  redis.call('PEXPIRE', rkey, ttl)
  redis.call('PEXPIRE', skey, ttl)
else
  redis.call('PERSIST', rkey)
end
return 1
`;

/**
 * take-handoff. KEYS[1] = <base>pods, KEYS[2] = <base>applied, KEYS[3] = the client's ht:<token> to receive
 * the record, [KEYS[4] = <base>writer, fenced only]; ARGV[1] = <base>, ARGV[2] = podId, ARGV[3] = how long
 * the client's key lives (ms), [ARGV[4] = lease holder]. Reply {0} none, {1, record bytes} (renamed to
 * KEYS[3]), {2} stale. Whatever the stamp, the handoff is gone afterwards: it is read once.
 */
export const TAKE_HANDOFF_LUA = `-- kinference take-handoff. KEYS[1] = <base>pods, KEYS[2] = <base>applied, KEYS[3] = record key,
-- [KEYS[4] = <base>writer]; ARGV[1] = <base>, ARGV[2] = pod id, ARGV[3] = record key ttl ms, [ARGV[4] = lease
-- holder]. Read once; the record moves to KEYS[3] only if its stamp matches.
${luaFence(4, 4)}
${LUA_ENTRY}
${STAMP}
local ref = redis.call('HGET', KEYS[1], ARGV[2])
if not ref then return { 0 } end
local rkey, skey = handoff_keys(ref)
local saved = redis.call('GET', skey)
redis.call('DEL', skey)
if redis.call('EXISTS', rkey) == 0 then return { 0 } end
if saved ~= stamp(ref) then
  redis.call('DEL', rkey)
  return { 2 }
end
redis.call('RENAME', rkey, KEYS[3])
redis.call('PEXPIRE', KEYS[3], tonumber(ARGV[3]))
return { 1, redis.call('STRLEN', KEYS[3]) }
`;
