import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PluginConfigSchema } from '../../../src/config/plugin-config.js';
import { validateConfig } from '../../../src/config/validate.js';
import { resolveTenant, type CallerFacts, type Policies } from '../../../src/policies/index.js';

const policiesOf = (p: unknown): Policies =>
  validateConfig(PluginConfigSchema, { policies: p }, 'c').policies!;

const caller = (over: Partial<CallerFacts> = {}): CallerFacts => ({
  consumer: null,
  consumerGroups: [],
  headerTenant: null,
  ...over,
});

const POLICIES = policiesOf({
  tenant_from: ['consumer', 'consumer_group', 'header', 'user'],
  // The first policy that matches applies: tenant names first, then consumers and groups.
  tenants: [
    { match: { tenant: 'team-a' }, class: 'interactive' },
    { match: { tenant: 'nightly' }, class: 'batch' },
    { match: { consumer: 'search-bot' }, class: 'batch' },
    { match: { consumer_group: 'gold' }, class: 'interactive' },
  ],
});

describe('a request’s tenant', () => {
  it('comes from the first source that names one, in the configured order', () => {
    const c = caller({
      consumer: { id: 'c1', username: 'alice' },
      consumerGroups: ['gold'],
      headerTenant: 'team-a',
    });
    expect(resolveTenant(POLICIES, c, 'u1')).toMatchObject({ name: 'alice', source: 'consumer' });
    const headerFirst = policiesOf({ tenant_from: ['header', 'consumer'] });
    expect(resolveTenant(headerFirst, c, null)).toMatchObject({ name: 'team-a', source: 'header' });
    expect(resolveTenant(POLICIES, caller({ consumerGroups: ['gold', 'x'] }), null)).toMatchObject({
      name: 'gold',
      source: 'consumer_group',
    });
    expect(resolveTenant(POLICIES, caller(), 'u1')).toMatchObject({ name: 'u1', source: 'user' });
    expect(resolveTenant(POLICIES, caller(), null)).toMatchObject({ name: 'default', source: 'default' });
  });

  it('takes the class of the first matching policy, else the default class', () => {
    expect(
      resolveTenant(POLICIES, caller({ consumer: { id: 'x', username: 'search-bot' } }), null),
    ).toMatchObject({ serviceClass: { name: 'batch' } });
    expect(
      resolveTenant(POLICIES, caller({ consumer: { id: 'x', custom_id: 'search-bot' } }), null),
    ).toMatchObject({ serviceClass: { name: 'batch' } });
    expect(resolveTenant(POLICIES, caller({ consumer: { id: 'x', username: 'bob' } }), null)).toMatchObject({
      serviceClass: { name: 'standard' },
    });
  });

  it('never takes a better class from a name only the client asserts (header, user)', () => {
    // No consumer: a header naming an interactive team gets the default class, not interactive.
    expect(resolveTenant(POLICIES, caller({ headerTenant: 'team-a' }), null)).toMatchObject({
      name: 'team-a',
      serviceClass: { name: 'standard' },
    });
    expect(resolveTenant(POLICIES, caller(), 'team-a').serviceClass.name).toBe('standard');
    // It may lower the class: a gold consumer naming the nightly job through the header is batch.
    const headerFirst = policiesOf({ ...POLICIES, tenant_from: ['header', 'consumer'] });
    const gold = caller({ consumer: { id: 'g' }, consumerGroups: ['gold'] });
    expect(resolveTenant(headerFirst, { ...gold, headerTenant: 'nightly' }, null).serviceClass.name).toBe(
      'batch',
    );
    // A gold consumer naming team-a keeps interactive: the consumer has it already.
    expect(resolveTenant(headerFirst, { ...gold, headerTenant: 'team-a' }, null).serviceClass.name).toBe(
      'interactive',
    );
  });

  it('property: a header or user name never gives a higher priority than the caller has without it', () => {
    const names = fc.constantFrom('team-a', 'nightly', 'alice', 'gold', 'search-bot', 'zz');
    fc.assert(
      fc.property(
        fc.option(fc.record({ id: fc.constant('id1'), username: names }), { nil: null }),
        fc.subarray(['gold', 'silver']),
        fc.option(names, { nil: null }),
        fc.option(names, { nil: null }),
        fc.shuffledSubarray(['consumer', 'consumer_group', 'header', 'user'] as const, { minLength: 1 }),
        (consumer, groups, header, user, order) => {
          const p = { ...POLICIES, tenant_from: order };
          const facts = caller({ consumer, consumerGroups: groups, headerTenant: header });
          const r = resolveTenant(p, facts, user);
          fc.pre(r.source === 'header' || r.source === 'user');
          const asserted = r.serviceClass.priority;
          const authOnly = resolveTenant(
            { ...p, tenant_from: ['consumer', 'consumer_group'] },
            { ...facts, headerTenant: null },
            null,
          ).serviceClass.priority;
          expect(asserted).toBeLessThanOrEqual(authOnly);
        },
      ),
    );
  });

  it('ignores names too long to be a tenant', () => {
    expect(resolveTenant(POLICIES, caller({ headerTenant: 'x'.repeat(129) }), null).source).toBe('default');
  });
});
