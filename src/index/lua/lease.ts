// The writer lease's Lua scripts (take or renew, release) and their replies.
/** Replies of the lease-take script (first element of its reply). */
export const LEASE_REPLY = {
  /** Another holder's value is there: nothing changed. Reply {held, holder, PTTL in ms}. */
  held: 0,
  /** The key was absent and is now ours, with the TTL. Reply {taken}. */
  taken: 1,
  /** The key was already ours: its TTL starts again. Reply {extended}. */
  extended: 2,
} as const;

/**
 * lease-take: take the writer lease of one model, or renew it (src/index/writer-lease.ts).
 *
 * KEYS[1] = <base>writer  STRING holder value, with a PX TTL
 * ARGV[1] = holder value (this process's), ARGV[2] = TTL in ms
 * Reply:   {LEASE_REPLY.taken} | {LEASE_REPLY.extended} | {LEASE_REPLY.held, holder value, PTTL ms}
 *
 * One script for acquiring and renewing, because both follow one rule: never touch another holder's
 * lease. Free: SET … PX (a renewal that finds it gone, after Redis restarted empty or was flushed, takes
 * it back the same way). Ours: PEXPIRE. Someone else's: report them, change nothing. Compare and set in
 * one atomic step, so two collectors cannot both win.
 */
export const LEASE_TAKE_LUA = `-- kinference lease-take. KEYS[1] = <base>writer; ARGV[1] = holder, ARGV[2] = TTL ms.
-- Free: take it; ours: extend it; another's: report it and change nothing. Atomic compare-and-set.
local cur = redis.call('GET', KEYS[1])
if not cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return { ${LEASE_REPLY.taken} }
end
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return { ${LEASE_REPLY.extended} }
end
return { ${LEASE_REPLY.held}, cur, redis.call('PTTL', KEYS[1]) }
`;

/**
 * lease-release: give the lease up on a clean stop, so a standby takes over at its next try instead of
 * waiting for the TTL.
 *
 * KEYS[1] = <base>writer; ARGV[1] = holder value
 * Reply:   1 if it was ours and is deleted, else 0 (another holder's lease is never deleted)
 */
export const LEASE_RELEASE_LUA = `-- kinference lease-release. KEYS[1] = <base>writer; ARGV[1] = holder.
-- Compare-and-delete: only our own lease goes.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`;
