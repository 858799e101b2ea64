// The index's Lua scripts, each loaded on a connection's first use of it.
import { APPLY_LUA } from './lua/apply.js';
import { SAVE_HANDOFF_LUA, TAKE_HANDOFF_LUA } from './lua/handoff.js';
import { LOOKUP_LUA } from './lua/lookup.js';
import { REMOVE_POD_LUA, UPSERT_POD_LUA } from './lua/pods.js';
import { SHARED_RESERVATIONS_LUA } from './lua/reservations.js';
import { RedisScript } from './script.js';

/** The index's scripts (sources in lua/), each loaded on a connection's first use of it (script.ts). */
export const SCRIPTS = {
  lookup: new RedisScript('lookup', LOOKUP_LUA),
  apply: new RedisScript('apply', APPLY_LUA),
  upsertPod: new RedisScript('upsert-pod', UPSERT_POD_LUA),
  removePod: new RedisScript('remove-pod', REMOVE_POD_LUA),
  saveHandoff: new RedisScript('save-handoff', SAVE_HANDOFF_LUA),
  takeHandoff: new RedisScript('take-handoff', TAKE_HANDOFF_LUA),
  sharedReservations: new RedisScript('shared-reservations', SHARED_RESERVATIONS_LUA),
} as const;
