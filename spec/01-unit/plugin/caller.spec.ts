import { describe, expect, it } from 'vitest';
import { callerFacts, consumerOf, groupNamesOf, type CallerPdk } from '../../../plugins/kinference/caller.js';
import { PluginConfigSchema } from '../../../src/config/plugin-config.js';
import { validateConfig } from '../../../src/config/validate.js';
import type { Policies } from '../../../src/policies/index.js';

/**
 * The plugin's identity calls, against a CallerPdk that answers as Kong's kong.client does (the Kong side
 * cannot run here; the stand-in has no consumers yet): which calls each policies section costs.
 */

const policiesOf = (p: unknown): Policies =>
  validateConfig(PluginConfigSchema, { policies: p }, 'c').policies!;

function kong(consumer: unknown, groups: unknown, fail = false): CallerPdk & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    getConsumer() {
      calls.push('kong.client.get_consumer');
      return fail ? Promise.reject(new Error('PDK method failed')) : Promise.resolve(consumer);
    },
    getConsumerGroups() {
      calls.push('kong.client.get_consumer_groups');
      return Promise.resolve(groups);
    },
  };
}

const ALICE = { id: 'c-1', username: 'alice', custom_id: 'A-7', created_at: 1 };
const GROUPS = [
  { id: 'g-1', name: 'gold' },
  { id: 'g-2', name: 'beta' },
];

describe('caller facts (plugins/kinference/caller.ts)', () => {
  it('header or user only: no PDK call, the header from the headers already read', async () => {
    const k = kong(ALICE, GROUPS);
    const facts = await callerFacts(k, policiesOf({ tenant_from: ['header', 'user'] }), {
      'x-tenant-id': ['team-a'],
    });
    expect(k.calls).toEqual([]);
    expect(facts).toEqual({ consumer: null, consumerGroups: [], headerTenant: 'team-a' });
  });

  it('consumer: one call; groups only when a source or a tenant match needs them', async () => {
    let k = kong(ALICE, GROUPS);
    expect(await callerFacts(k, policiesOf({ tenant_from: ['consumer'] }), {})).toEqual({
      consumer: { id: 'c-1', username: 'alice', custom_id: 'A-7' },
      consumerGroups: [],
      headerTenant: null,
    });
    expect(k.calls).toEqual(['kong.client.get_consumer']);
    k = kong(ALICE, GROUPS);
    const facts = await callerFacts(k, policiesOf({}), {});
    expect(k.calls).toEqual(['kong.client.get_consumer', 'kong.client.get_consumer_groups']);
    expect(facts.consumerGroups).toEqual(['gold', 'beta']);
    k = kong(ALICE, GROUPS);
    await callerFacts(
      k,
      policiesOf({
        tenant_from: ['consumer'],
        tenants: [{ match: { consumer_group: 'gold' }, class: 'batch' }],
      }),
      {},
    );
    expect(k.calls).toHaveLength(2);
  });

  it('no consumer (nil): no groups call; several tenant headers name nobody', async () => {
    const k = kong(undefined, GROUPS);
    const facts = await callerFacts(k, policiesOf({ tenant_from: ['consumer_group', 'header'] }), {
      'x-tenant-id': ['a', 'b'],
    });
    expect(k.calls).toEqual(['kong.client.get_consumer']);
    expect(facts).toEqual({ consumer: null, consumerGroups: [], headerTenant: null });
  });

  it('a failed call is no consumer (fail open)', async () => {
    const k = kong(ALICE, GROUPS, true);
    expect((await callerFacts(k, policiesOf({}), {})).consumer).toBeNull();
  });

  it('reads entities as Kong sends them (an empty Lua table packs as an empty array)', () => {
    expect(consumerOf([])).toBeNull();
    expect(consumerOf({ username: 'x' })).toBeNull();
    expect(groupNamesOf([])).toEqual([]);
    expect(groupNamesOf(undefined)).toEqual([]);
    expect(groupNamesOf([{ id: 'g' }, { name: 'n' }])).toEqual(['n']);
  });
});
