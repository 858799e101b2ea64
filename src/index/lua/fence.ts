// The writer fence the Lua write scripts start with, and its NOT_LEASE_HOLDER reply.
/**
 * Reply of a fenced write script run by a process that does not hold the model's writer lease:
 * {NOT_LEASE_HOLDER, the lease key's value}. Nothing was written. Also in APPLY_REPLY (apply.ts).
 */
export const NOT_LEASE_HOLDER = -5;

/**
 * The writer fence, the first statement of every script that writes a model's keys (apply, upsert-pod,
 * remove-pod): a collector that lost its writer lease (src/index/writer-lease.ts) must not write even
 * before its renewal notices, e.g. after a freeze longer than the lease's TTL.
 *
 * A fenced call passes one KEY more than an unfenced one, KEYS[`keyIndex`] = <base>writer (the model's
 * lease: same hash tag, same Cluster slot as the other KEYS), and the holder value it expects there in
 * ARGV[`argIndex`], the string the lease keeper writes. An unfenced call (tools, tests, a writer without
 * a lease) sends exactly the KEYS and ARGV it always did and is not checked.
 *
 * Another value in the key: refuse, change nothing. No key at all (Redis restarted empty, flushed, or the
 * lease expired and nobody took it yet): let the write through. The holder's keeper takes the key back
 * within ttl/3 (at once after a reconnection), and refusing would stall every write after an empty
 * restart, or make the collector exit as if another had taken over. A late writer's write in that window
 * lands before any new holder exists, and a new holder's first write to each pod is a clear.
 *
 * One GET inside a script that runs anyway: no extra round trip. Atomic with the write that follows.
 */
export function luaFence(keyIndex: number, argIndex: number): string {
  return `-- writer fence: with KEYS[${keyIndex}] (the lease), ARGV[${argIndex}] must hold it, or the key be absent
local fenced = #KEYS == ${keyIndex}
if fenced then
  local holder = redis.call('GET', KEYS[${keyIndex}])
  if holder and holder ~= ARGV[${argIndex}] then return { ${NOT_LEASE_HOLDER}, holder } end
end`;
}

/** The lease key's value in a NOT_LEASE_HOLDER reply, or null for any other reply. */
export function notLeaseHolderReply(reply: unknown): string | null {
  return Array.isArray(reply) &&
    reply.length === 2 &&
    reply[0] === NOT_LEASE_HOLDER &&
    typeof reply[1] === 'string'
    ? reply[1]
    : null;
}
