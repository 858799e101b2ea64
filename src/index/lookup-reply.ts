// Parses the Lua lookup script's reply into a LookupResult sorted by pod id.
import { KinferenceError } from '../core/errors.js';
import type { LookupResult, PodLookup } from '../core/types.js';
import { comparePodIds } from './pod-order.js';
import { decodePodState, parseStateRecord } from './pod-state-codec.js';

/**
 * Parses the lookup script's reply, { {podId, gpu, cpu, storage, stateRecord}, … }, into a
 * LookupResult sorted by podId. Pure; anything unexpected is KINF_ERR_INDEX_REPLY.
 */
export function parseLookupReply(model: string, reply: unknown): LookupResult {
  if (!Array.isArray(reply)) throw bad('reply is not an array');
  const pods: PodLookup[] = reply.map((row: unknown, i) => {
    if (!Array.isArray(row) || row.length !== 5)
      throw bad(`row ${i} is not [podId, gpu, cpu, storage, state]`);
    const [podId, gpu, cpu, storage, record] = row as unknown[];
    if (typeof podId !== 'string') throw bad(`row ${i}: pod id is not a string`);
    const counts = [gpu, cpu, storage].map((v) => (typeof v === 'string' ? Number(v) : v));
    if (!counts.every((v) => typeof v === 'number' && Number.isInteger(v) && v >= 0))
      throw bad(`row ${i}: prefix lengths are not non-negative integers`);
    if (typeof record !== 'string') throw bad(`row ${i}: state is not a record string`);
    const [g, c, s] = counts as number[];
    return {
      state: decodePodState({ model, podId }, parseStateRecord(record)),
      prefixBlocks: { GPU: g!, CPU: c!, STORAGE: s! },
    };
  });
  pods.sort((a, b) => comparePodIds(a.state.podId, b.state.podId));
  return { pods };
}

function bad(what: string): KinferenceError {
  return new KinferenceError('KINF_ERR_INDEX_REPLY', `index lookup: ${what}`);
}
