// The limiter's Lua scripts: admit (every check, then count all or nothing) and adjust.

/**
 * KEYS: the counters, then the slot's sorted set if any. ARGV: now, n, then per counter limit, amount, ttl
 * (ms), then for the slot max, member, expiry score, ttl. Every check is made before anything is counted,
 * so a request is counted everywhere or nowhere, atomically on the shard: a prompt limit can never be passed.
 * Returns {refused (0 none, i counter i, n+1 the slot), in flight, value of each counter}.
 */
export const ADMIT_LUA = `
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local vals = {}
local refused = 0
for i = 1, n do
  local v = tonumber(redis.call('GET', KEYS[i]) or '0')
  vals[i] = v
  if refused == 0 and v + tonumber(ARGV[3 * i + 1]) > tonumber(ARGV[3 * i]) then refused = i end
end
local inflight = 0
local hasSlot = #KEYS > n
local s = 3 * n + 3
if hasSlot then
  redis.call('ZREMRANGEBYSCORE', KEYS[n + 1], '-inf', now)
  inflight = redis.call('ZCARD', KEYS[n + 1])
  if refused == 0 and inflight >= tonumber(ARGV[s]) then refused = n + 1 end
end
if refused == 0 then
  for i = 1, n do
    vals[i] = redis.call('INCRBY', KEYS[i], ARGV[3 * i + 1])
    redis.call('PEXPIRE', KEYS[i], ARGV[3 * i + 2])
  end
  if hasSlot then
    redis.call('ZADD', KEYS[n + 1], ARGV[s + 2], ARGV[s + 1])
    redis.call('PEXPIRE', KEYS[n + 1], ARGV[s + 3])
    inflight = inflight + 1
  end
end
local out = {refused, inflight}
for i = 1, n do out[i + 2] = vals[i] end
return out
`;

/**
 * KEYS: counters, then the slot's set if any. ARGV: n, each counter's delta, then the slot member. A counter
 * whose window is gone (key expired) is left gone; none goes below zero; the slot member is removed.
 */
export const ADJUST_LUA = `
local n = tonumber(ARGV[1])
for i = 1, n do
  local d = tonumber(ARGV[i + 1])
  if d ~= 0 and redis.call('EXISTS', KEYS[i]) == 1 then
    local v = redis.call('INCRBY', KEYS[i], d)
    if v < 0 then redis.call('SET', KEYS[i], 0, 'KEEPTTL') end
  end
end
if #KEYS > n then redis.call('ZREM', KEYS[n + 1], ARGV[n + 2]) end
return 1
`;
