// Runs several tenants' workloads at once on one fleet in virtual time (the mixed-tenant benchmark).
import type { CallerFacts } from '../../../src/policies/index.js';
import type { Profile } from '../types.js';
import type { WorkloadFactory } from '../workload/workloads.js';
import {
  runEventLoop,
  type LoopInput,
  type LoopRecord,
  type LoopResult,
  type RunSetup,
} from './event-loop.js';

/** One tenant of the mix: its workload, its load (open loop or streams), and who Kong says it is. */
export interface TenantSource {
  name: string;
  factory: WorkloadFactory;
  /** Its windows are ignored: the mix's `windows` apply to every tenant. */
  profile: Profile;
  caller: CallerFacts;
}

/** One request of the mix, with its tenant and, when the gateway answered it, who refused it. */
export interface MixedRecord extends LoopRecord {
  tenant: string;
}

export interface MixedInput extends RunSetup, Pick<LoopInput, 'windows'> {
  tenants: TenantSource[];
}

export interface MixedResult extends Omit<LoopResult, 'records'> {
  records: MixedRecord[];
}

/**
 * The tenants of a mix, each with GuideLLM's client (its own conversations, open-loop slots or streams),
 * sharing one fleet and one arm, in virtual time: the event loop (event-loop.ts) with one source per tenant,
 * each request keyed by its tenant and carrying the tenant's caller facts to the arm.
 */
export async function runMixed(input: MixedInput): Promise<MixedResult> {
  const { tenants, ...rest } = input;
  const r = await runEventLoop({ ...rest, sources: tenants });
  return { ...r, records: r.records as MixedRecord[] };
}
