// The shared-reservations Lua script: the routers' newest reservations of a model, less the reader's own.
/**
 * shared-reservations: the newest shared reservations of a model made at or after a time, less the
 * reader's own (src/router/shared-reservations.ts).
 *
 * KEYS[1] = <base>resv  ZSET member "router|id|uncachedTokens|promptTokens|podId", score atMs
 * ARGV[1] = since (ms), ARGV[2] = how many of the newest to look at, ARGV[3] = the reading router's id
 * Reply:   { member, score, member, score, … }, newest first, the reader's own left out
 *
 * Why a script and not ZREVRANGEBYSCORE: a router counts only the other routers' reservations, and with
 * one Kong node every member is its own. Filtering here keeps them off the wire and out of the client's
 * parser on every request (up to `limit` members of ~50 bytes). The window is the same `limit` newest
 * either way. Read-only.
 */
export const SHARED_RESERVATIONS_LUA = `-- kinference shared-reservations. KEYS[1] = <base>resv; ARGV[1] = since (ms), ARGV[2] = limit,
-- ARGV[3] = the reader's router id. Read-only: the newest ARGV[2] members from ARGV[1] on, less the reader's.
local flat = redis.call('ZREVRANGEBYSCORE', KEYS[1], '+inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, ARGV[2])
local own = ARGV[3] .. '|'
local n = #own
local out = {}
for i = 1, #flat, 2 do
  if string.sub(flat[i], 1, n) ~= own then
    out[#out + 1] = flat[i]
    out[#out + 1] = flat[i + 1]
  end
end
return out
`;
