// A block's Redis value: one packed entry per holding pod (epoch, refcount per tier), in Lua and TypeScript.
import { REFCOUNT_MAX } from '../kv-index.js';

/**
 * A block's Redis value is one short string, "idx=value,idx=value,…", an entry per pod holding it (idx is
 * the pod's small per-model index). Each (block, pod) entry packs the pod's epoch and a refcount per tier
 * into ONE integer:
 *
 *   value = gpu + 2^10·epoch + 2^30·cpu + 2^40·storage      (refcounts 10 bits each, epoch 20 bits)
 *
 * The common case (GPU only, refcount 1, epoch 0) is "3=1": three bytes. A string rather than a hash per
 * block, because MGET reads many blocks in one call (the lookup batches its probes) and SET … EX writes
 * value and TTL at once. Max value < 2^50: exact in Lua's doubles. Lua writes it with %.0f, never
 * tostring() (%.14g rounds).
 * An epoch is compared modulo 2^20: an entry would only come back to life after 2^20 clears of its pod,
 * and the block TTL removes it long before.
 */
export const ENTRY = {
  rcBits: 10,
  epochBits: 20,
  rcMax: REFCOUNT_MAX,
} as const;

/** Lua locals and helpers shared by the scripts (interpolated into their source). */
export const LUA_ENTRY = `
local RC = ${2 ** ENTRY.rcBits}
local EP = ${2 ** ENTRY.epochBits}
local RCMAX = ${ENTRY.rcMax}
local ENTRY_PATTERN = '(%d+)=(%d+)'
local function entry_epoch(v) return math.floor(v / RC) % EP end
-- refcounts per tier (GPU, CPU, STORAGE)
local function entry_counts(v)
  return v % RC, math.floor(v / (RC * EP)) % RC, math.floor(v / (RC * EP * RC)) % RC
end
local function entry_pack(g, c, s, epoch)
  return string.format('%.0f', g + RC * (epoch % EP) + RC * EP * c + RC * EP * RC * s)
end
-- fastest tier holding the block (0 GPU, 1 CPU, 2 STORAGE), or nil
local function entry_rank(v)
  local g, c, s = entry_counts(v)
  if g > 0 then return 0 elseif c > 0 then return 1 elseif s > 0 then return 2 end
  return nil
end
-- "idx:epoch" from the pods hash
local function pod_ref(v)
  local sep = string.find(v, ':', 1, true)
  return string.sub(v, 1, sep - 1), tonumber(string.sub(v, sep + 1))
end
`;

/** The same packing in TypeScript, for tests and tools that inspect raw Redis values. */
export function packEntry(counts: readonly [number, number, number], epoch: number): number {
  const rc = 2 ** ENTRY.rcBits;
  const ep = 2 ** ENTRY.epochBits;
  return counts[0] + rc * (epoch % ep) + rc * ep * counts[1] + rc * ep * rc * counts[2];
}
