// The lookup Lua script: every pod's longest cached prefix per tier and its state, in one EVALSHA.
import { KEY_SUFFIX } from '../redis-keys.js';
import { LUA_ENTRY } from './entry.js';

/**
 * State record keys per MGET in the lookup: a pod list longer than this is read in chunks, because
 * unpack() puts every key on Lua's C stack (LUAI_MAXCSTACK, 8,000 slots in Redis's Lua 5.1).
 */
export const LOOKUP_STATE_KEYS_PER_MGET = 500;
/** The pods hash comes back flat (podId, ref, podId, ref, …): two entries per pod. */
const REFS_PER_CHUNK = 2 * LOOKUP_STATE_KEYS_PER_MGET;

/**
 * lookup: every registered pod of one model, its longest cached prefix per tier and its state, in ONE
 * EVALSHA (the plugin's single round trip per request).
 *
 * KEYS[1] = <base>pods   HASH podId → "idx:epoch"
 * ARGV[1] = <base>       e.g. "kinf:{Ab3_x9Qz}:"; state and block keys are built from it and share
 *                        KEYS[1]'s hash tag, so the script touches one Cluster slot
 * ARGV[2] = the prompt's block keys, 8 raw bytes each, concatenated ("" for none)
 * Reply:   { {podId, gpuBlocks, cpuBlocks, storageBlocks, stateRecord}, … }, one per pod whose state
 *          record exists (registered), in pods-hash order (the client sorts by podId); the record is the
 *          string upsert-pod writes, returned as is (one bulk string per pod, one MGET for all of them)
 *
 * Atomic because Redis runs a script alone: pod list, epochs, blocks and states are one snapshot, never
 * half of a concurrent apply. Read-only.
 *
 * Cost: every pod and tier runs gallopPrefix (src/index/prefix-search.ts) with tierPrefixes' skip of
 * slower tiers and its clamp, so both indexes agree on every input. The searches share probes (a block
 * read once answers for every pod), one MGET fetches the whole gallop path (blocks 0, 1, 3, 7, …) up
 * front, and a binary search fetches its next three levels of bisection points in one MGET. Decoding is
 * memoised per distinct block value. A 1,000-block prompt costs a handful of MGETs whatever the pods.
 */
export const LOOKUP_LUA = `-- kinference lookup. KEYS[1] = <base>pods; ARGV[1] = <base>, ARGV[2] = block keys (8 bytes each).
-- Read-only; atomic as every script: one consistent snapshot of pods, epochs, blocks and states.
${LUA_ENTRY}
local base = ARGV[1]
local blob = ARGV[2]
local n = math.floor(#blob / 8)
local block = base .. '${KEY_SUFFIX.block}'
local pods, by_idx = {}, {}
local refs = redis.call('HGETALL', KEYS[1])
-- every pod's state record, ${LOOKUP_STATE_KEYS_PER_MGET} keys per MGET (unpack's stack limit)
for from = 1, #refs, ${REFS_PER_CHUNK} do
  local ids, idxs, epochs, skeys = {}, {}, {}, {}
  for i = from, math.min(#refs, from + ${REFS_PER_CHUNK - 2}), 2 do
    local idx, epoch = pod_ref(refs[i + 1])
    ids[#ids + 1], idxs[#idxs + 1], epochs[#epochs + 1] = refs[i], idx, epoch
    skeys[#skeys + 1] = base .. '${KEY_SUFFIX.state}' .. idx
  end
  local states = redis.call('MGET', unpack(skeys))
  for k, state in ipairs(states) do
    if state then
      local e = epochs[k] % EP
      -- a GPU-only entry of the live epoch is a value in (lo, hi): the hot path decodes with two compares
      local p = { id = ids[k], idx = idxs[k], epoch = e, lo = e * RC, hi = (e + 1) * RC, state = state }
      pods[#pods + 1] = p
      by_idx[idxs[k]] = p
    end
  end
end

-- decode(value): pod idx -> fastest tier, for live entries of registered pods. Memoised by the value
-- string: blocks held by the same pods with the same counts have the same value (a shared system
-- prompt is one string on all its blocks), so a lookup decodes a handful of distinct strings.
local decoded = {}
local none = {}
local function decode(val)
  if not val then return none end
  local c = decoded[val]
  if c then return c end
  c = {}
  for idx, v in string.gmatch(val, ENTRY_PATTERN) do
    local p = by_idx[idx]
    if p then
      v = tonumber(v)
      if v > p.lo and v < p.hi then
        c[idx] = 0
      elseif entry_epoch(v) == p.epoch then
        c[idx] = entry_rank(v)
      end
    end
  end
  decoded[val] = c
  return c
end

-- probes[i]: decode() of block i (0-based); one MGET per batch of blocks
local probes = {}
local function fetch(list)
  local keys = {}
  for k, i in ipairs(list) do keys[k] = block .. string.sub(blob, i * 8 + 1, i * 8 + 8) end
  local vals = redis.call('MGET', unpack(keys))
  for k, i in ipairs(list) do probes[i] = decode(vals[k]) end
end

-- Bisection points of (lo, hi] down to depth levels, not yet probed: fetched together, so a binary
-- search makes one call per LOOKAHEAD steps instead of one per step.
local LOOKAHEAD = 3
local function collect(list, lo, hi, depth)
  if depth == 0 or lo >= hi then return end
  local mid = lo + math.ceil((hi - lo) / 2)
  if probes[mid - 1] == nil then list[#list + 1] = mid - 1 end
  collect(list, mid, hi, depth - 1)
  collect(list, lo, mid - 1, depth - 1)
end

-- gallopPrefix (src/index/prefix-search.ts) for one pod and tier; also returns the slowest tier rank
-- met on the path (a slower tier that never showed up needs no search of its own)
local function prefix(idx, tier)
  if n == 0 then return 0, 0 end
  local worst, lo, hi, len = 0, 0, n, 1
  while true do
    local m = len < n and len or n
    local r = probes[m - 1][idx] -- the gallop path is fetched up front
    if r ~= nil and r > worst then worst = r end
    if r == nil or r > tier then
      hi = m - 1
      break
    end
    lo = m
    if m == n then return n, worst end
    len = len * 2
  end
  while lo < hi do
    local mid = lo + math.ceil((hi - lo) / 2)
    local c = probes[mid - 1]
    if c == nil then
      local list = {}
      collect(list, lo, hi, LOOKAHEAD)
      fetch(list)
      c = probes[mid - 1]
    end
    local r = c[idx]
    if r ~= nil and r > worst then worst = r end
    if r ~= nil and r <= tier then lo = mid else hi = mid - 1 end
  end
  return lo, worst
end

-- the gallop path (blocks 0, 1, 3, 7, …, count−1), shared by every search, in one MGET
if n > 0 and #pods > 0 then
  local path, len = {}, 1
  while true do
    local m = len < n and len or n
    path[#path + 1] = m - 1
    if m == n then break end
    len = len * 2
  end
  fetch(path)
end

local out = {}
for k, p in ipairs(pods) do
  local g, worst = prefix(p.idx, 0)
  local c, s = g, g
  if worst >= 1 then c, worst = prefix(p.idx, 1) end
  if worst >= 2 then s = prefix(p.idx, 2) else s = c end
  c = math.max(g, c)
  s = math.max(c, s)
  out[k] = { p.id, g, c, s, p.state }
end
return out
`;
