import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseDeclarative } from '../../../kong/stand-in/declarative.js';
import { responseType } from '../../../kong/stand-in/error-response.js';
import { lookupPlugin } from '../../../kong/stand-in/gateway.js';
import { windowStarts } from '../../../kong/stand-in/rate-limiting.js';

/** Consumers, credentials, consumer groups and scoped plugins in kong.yaml; Kong's lookup and window rules. */

const base = {
  _format_version: '3.0',
  services: [{ name: 's', url: 'http://127.0.0.1:9', routes: [{ name: 'r', paths: ['/'] }] }],
};

describe('consumers, credentials and consumer groups in the declarative config', () => {
  it('reads nested and top-level credentials, both decK membership forms and scoped plugins', () => {
    const cfg = parseDeclarative({
      ...base,
      consumers: [
        { username: 'alice', tags: ['a'], keyauth_credentials: [{ key: 'k1' }], groups: [{ name: 'gold' }] },
        { custom_id: 'c-2', plugins: [{ name: 'rate-limiting', config: { minute: 1 } }] },
      ],
      keyauth_credentials: [{ key: 'k2', consumer: 'c-2' }],
      consumer_groups: [
        { name: 'gold', plugins: [{ name: 'rate-limiting', config: { minute: 5 } }] },
        { name: 'silver', consumers: [{ username: 'alice' }, { custom_id: 'c-2' }] },
      ],
      plugins: [{ name: 'rate-limiting', route: 'r', consumer: 'alice', config: { hour: 9 } }],
    });
    const [alice, c2] = cfg.consumers;
    expect(alice).toMatchObject({ username: 'alice', customId: null, tags: ['a'] });
    expect(c2).toMatchObject({ username: null, customId: 'c-2' });
    expect(cfg.keyauthCredentials.map((c) => [c.key, c.consumerId])).toEqual([
      ['k1', alice!.id],
      ['k2', c2!.id],
    ]);
    const gold = cfg.consumerGroups.find((g) => g.name === 'gold')!;
    const silver = cfg.consumerGroups.find((g) => g.name === 'silver')!;
    expect(gold.consumerIds).toEqual([alice!.id]);
    expect(silver.consumerIds).toEqual([alice!.id, c2!.id]);
    const scopes = cfg.plugins.map((p) => [
      p.consumerId ?? null,
      p.consumerGroupId ?? null,
      p.routeId !== null,
    ]);
    expect(scopes).toEqual([
      [c2!.id, null, false],
      [null, gold.id, false],
      [alice!.id, null, true],
    ]);
    // Stable ids across loads, as for the other entities.
    expect(parseDeclarative({ ...base, consumers: [{ username: 'alice' }] }).consumers[0]!.id).toBe(
      alice!.id,
    );
  });

  it('refuses what Kong refuses, in its words', () => {
    const bad = (doc: Record<string, unknown>): string => {
      try {
        parseDeclarative({ ...base, ...doc });
      } catch (e) {
        return (e as Error).message;
      }
      return 'accepted';
    };
    expect(bad({ consumers: [{ username: 'a', nickname: 'x' }] })).toMatch(
      /consumers\[0\]: nickname: unknown field/,
    );
    expect(bad({ consumers: [{ tags: [] }] })).toMatch(
      /at least one of these fields must be non-empty: 'custom_id', 'username'/,
    );
    expect(bad({ consumers: [{ username: 'a' }, { username: 'a' }] })).toMatch(
      /uniqueness violation: 'consumers' entity with username set to 'a' already declared/,
    );
    expect(
      bad({
        consumers: [
          { username: 'a', keyauth_credentials: [{ key: 'k' }] },
          { username: 'b', keyauth_credentials: [{ key: 'k' }] },
        ],
      }),
    ).toMatch(/'keyauth_credentials' entity with key set to 'k' already declared/);
    expect(bad({ consumer_groups: [{ name: 'g' }, { name: 'g' }] })).toMatch(
      /'consumer_groups' entity with name set to 'g'/,
    );
    expect(bad({ consumer_groups: [{ name: 'g', consumers: [{ username: 'ghost' }] }] })).toMatch(
      /consumer_groups\[0\].consumers\[0\]: consumer \{"username":"ghost"\} is not declared/,
    );
    expect(bad({ consumers: [{ username: 'a', groups: [{ name: 'none' }] }] })).toMatch(
      /consumer_group .* is not declared/,
    );
    expect(bad({ consumers: [{ username: 'a', basicauth_credentials: [] }] })).toMatch(
      /not served by the stand-in/,
    );
    expect(bad({ keyauth_credentials: [{ key: 'k' }] })).toMatch(/consumer: required field missing/);
    expect(
      bad({
        consumers: [{ username: 'a' }],
        plugins: [
          { name: 'rate-limiting', consumer: 'a', config: { minute: 1 } },
          { name: 'rate-limiting', consumer: 'a', config: { minute: 2 } },
        ],
      }),
    ).toMatch(/configured twice/);
  });
});

describe('plugins_iterator lookup_cfg order (Kong Gateway Enterprise, with groups)', () => {
  const ORDER = [
    ['R', 'S', 'C', null],
    ['R', 'S', null, 'G'],
    ['R', null, 'C', null],
    [null, 'S', 'C', null],
    ['R', null, null, 'G'],
    [null, 'S', null, 'G'],
    ['R', 'S', null, null],
    [null, null, 'C', null],
    [null, null, null, 'G'],
    ['R', null, null, null],
    [null, 'S', null, null],
    [null, null, null, null],
  ] as const;
  const entity = (i: number) => {
    const [routeId, serviceId, consumerId, consumerGroupId] = ORDER[i]!;
    return {
      entity: {
        id: String(i),
        name: 'p',
        instanceName: null,
        routeId,
        serviceId,
        consumerId,
        consumerGroupId,
        enabled: true,
        config: {},
      },
    };
  };

  it('picks the most specific config present, whatever else is configured', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 0, max: ORDER.length - 1 }), { minLength: 1 }),
        (present) => {
          const hit = lookupPlugin(present.map(entity), 'p', 'R', 'S', 'C', [{ id: 'G' }]);
          expect(hit?.entity.id).toBe(String(Math.min(...present)));
        },
      ),
    );
  });

  it('ignores configs of other consumers, groups, routes and services', () => {
    const other = { entity: { ...entity(7).entity, id: 'x', consumerId: 'D' } };
    expect(lookupPlugin([other], 'p', 'R', 'S', 'C', null)).toBeUndefined();
    expect(lookupPlugin([entity(8)], 'p', 'R', 'S', 'C', null)).toBeUndefined();
    expect(lookupPlugin([entity(0)], 'p', 'R', 'S', undefined, null)).toBeUndefined();
  });
});

describe('rate-limiting windows (kong/tools/timestamp.lua get_timestamps)', () => {
  it('every window starts at or before now, aligned in UTC, nested second ⊂ minute ⊂ … ⊂ year', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 4_102_444_800_000 }), (now) => {
        const w = windowStarts(now);
        const order = [w.year, w.month, w.day, w.hour, w.minute, w.second];
        for (let i = 1; i < order.length; i++) expect(order[i]!).toBeGreaterThanOrEqual(order[i - 1]!);
        expect(w.second).toBe(Math.floor(now / 1000) * 1000);
        expect(now - w.minute).toBeLessThan(60_000);
        expect(w.hour % 3_600_000).toBe(0);
        expect(w.day % 86_400_000).toBe(0);
        const d = new Date(w.month);
        expect([d.getUTCDate(), d.getUTCHours()]).toEqual([1, 0]);
        expect(new Date(w.year).getUTCMonth()).toBe(0);
      }),
    );
  });
});

describe('kong.response.error content type (tools/http.lua get_response_type)', () => {
  it('takes the Accept value with the highest q, JSON when none or unknown', () => {
    expect(responseType(undefined)).toBe('application/json; charset=utf-8');
    expect(responseType('text/html')).toBe('text/html; charset=utf-8');
    expect(responseType('text/html;q=0.5, application/xml')).toBe('application/xml; charset=utf-8');
    expect(responseType('image/png')).toBe('application/json; charset=utf-8');
    expect(responseType('text/*')).toBe('text/plain; charset=utf-8');
    expect(responseType('*/*')).toBe('application/json; charset=utf-8');
  });
});
