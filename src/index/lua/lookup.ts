import { KEY_SUFFIX } from '../redis-keys.js';
import { LUA_ENTRY } from './entry.js';

/**
 * lookup: every registered pod of one model, its longest cached prefix per tier and its state, in ONE
 * EVALSHA (the plugin's single round trip per request).
 *
 * KEYS[1] = <base>pods   HASH podId → "idx:epoch"
 * ARGV[1] = <base>       e.g. "kinf:{Ab3_x9Qz}:"; state and block keys are built from it and share
 *                        KEYS[1]'s hash tag, so the script touches one Cluster slot
 * ARGV[2] = the prompt's block keys, 8 raw bytes each, concatenated ("" for none)
 * Reply:   { {podId, gpuBlocks, cpuBlocks, storageBlocks, {stateField, value, …}}, … }, one per pod whose
 *          state hash exists (registered), in pods-hash order (the client sorts by podId)
 *
 * Atomic because Redis runs a script alone: pod list, epochs, blocks and states are one snapshot, never
 * half of a concurrent apply. Read-only. Each probe of block i is ONE HGETALL that answers for every pod
 * (fields are pod indexes), cached, so the per-pod searches share probes; the search is gallopPrefix of
 * src/index/prefix-search.ts, line for line, and the clamp of tierPrefixes.
 */
export const LOOKUP_LUA = `${LUA_ENTRY}
local base = ARGV[1]
local blob = ARGV[2]
local n = math.floor(#blob / 8)
local block = base .. '${KEY_SUFFIX.block}'
local pods, by_idx = {}, {}
local refs = redis.call('HGETALL', KEYS[1])
for i = 1, #refs, 2 do
  local idx, epoch = pod_ref(refs[i + 1])
  local state = redis.call('HGETALL', base .. '${KEY_SUFFIX.state}' .. idx)
  if #state > 0 then
    local p = { id = refs[i], idx = idx, epoch = epoch % EP, state = state }
    pods[#pods + 1] = p
    by_idx[idx] = p
  end
end

-- probe(i): pod idx -> fastest tier holding block i (0-based), live entries only
local probes = {}
local function probe(i)
  local c = probes[i]
  if c then return c end
  c = {}
  local flat = redis.call('HGETALL', block .. string.sub(blob, i * 8 + 1, i * 8 + 8))
  for j = 1, #flat, 2 do
    local p = by_idx[flat[j]]
    if p then
      local v = tonumber(flat[j + 1])
      if entry_epoch(v) == p.epoch then c[flat[j]] = entry_rank(v) end
    end
  end
  probes[i] = c
  return c
end

local function prefix(idx, tier)
  if n == 0 then return 0 end
  local function held(i)
    local r = probe(i)[idx]
    return r ~= nil and r <= tier
  end
  local lo, hi, len = 0, n, 1
  while true do
    local m = math.min(len, n)
    if not held(m - 1) then
      hi = m - 1
      break
    end
    lo = m
    if m == n then return n end
    len = len * 2
  end
  while lo < hi do
    local mid = lo + math.ceil((hi - lo) / 2)
    if held(mid - 1) then lo = mid else hi = mid - 1 end
  end
  return lo
end

local out = {}
for k, p in ipairs(pods) do
  local g = prefix(p.idx, 0)
  local c = math.max(g, prefix(p.idx, 1))
  local s = math.max(c, prefix(p.idx, 2))
  out[k] = { p.id, g, c, s, p.state }
end
return out
`;
