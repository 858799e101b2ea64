// Who sent the request (policies only): the Kong consumer, its groups and the tenant header, as CallerFacts.
import { boundedDetail } from '../../src/core/bounded-detail.js';
import type { CallerFacts, Consumer, Policies } from '../../src/policies/index.js';
import { logOnce } from './log-once.js';
import type { RawKong, RequestHeaders } from './pdk.js';

/** The two PDK calls identity needs (Kong 3.4+), each ONE round trip; nil crosses as undefined. */
export interface CallerPdk {
  /** kong.client.get_consumer(): the authenticated consumer entity, nil when none. */
  getConsumer(): Promise<unknown>;
  /** kong.client.get_consumer_groups(): the consumer's group entities, nil when none. */
  getConsumerGroups(): Promise<unknown>;
}

export function wrapCaller(kong: RawKong): CallerPdk {
  const k = kong as unknown as {
    client: { getConsumer(): Promise<unknown>; getConsumerGroups(): Promise<unknown> };
  };
  return {
    getConsumer: () => k.client.getConsumer(),
    getConsumerGroups: () => k.client.getConsumerGroups(),
  };
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v.length > 0 ? v : undefined);

/** The consumer entity's fields we read; anything else (nil, an empty Lua table) is no consumer. */
export function consumerOf(v: unknown): Consumer | null {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return null;
  const o = v as Record<string, unknown>;
  const id = str(o.id);
  if (id === undefined) return null;
  const username = str(o.username);
  const customId = str(o.custom_id);
  return { id, ...(username ? { username } : {}), ...(customId ? { custom_id: customId } : {}) };
}

/** Group names, in Kong's order, from the entity list (nil, or an empty Lua table, is none). */
export function groupNamesOf(v: unknown): string[] {
  if (!Array.isArray(v)) return [];
  return v.flatMap((g) => {
    const n = typeof g === 'object' && g !== null ? str((g as Record<string, unknown>).name) : undefined;
    return n === undefined ? [] : [n];
  });
}

/** Which PDK calls a policies section needs: none unless tenant_from names the consumer or its group. */
export function identityCalls(p: Policies): { consumer: boolean; groups: boolean } {
  const byConsumer = p.tenant_from.includes('consumer');
  const byGroup = p.tenant_from.includes('consumer_group');
  // Groups also decide which tenant policy applies when a policy matches on one.
  const groupMatch = p.tenants.some((t) => t.match.consumer_group !== undefined);
  return { consumer: byConsumer || byGroup, groups: byGroup || (byConsumer && groupMatch) };
}

/** The tenant header's value, when sent exactly once (several values name nobody). */
export function headerTenant(headers: RequestHeaders, name: string): string | null {
  const v = headers[name.toLowerCase()];
  return v?.length === 1 && v[0]!.length > 0 ? v[0]! : null;
}

/**
 * The caller's facts for the router. PDK calls: get_consumer when tenant_from names consumer or
 * consumer_group, then get_consumer_groups when groups matter and there is a consumer; the header comes from
 * the headers the access phase already has. A failed call counts as no consumer (fail open, said once).
 */
export async function callerFacts(
  pdk: CallerPdk,
  p: Policies,
  headers: RequestHeaders,
): Promise<CallerFacts> {
  const calls = identityCalls(p);
  let consumer: Consumer | null = null;
  let consumerGroups: string[] = [];
  try {
    if (calls.consumer) consumer = consumerOf(await pdk.getConsumer());
    if (calls.groups && consumer !== null) consumerGroups = groupNamesOf(await pdk.getConsumerGroups());
  } catch (e) {
    logOnce(
      'caller',
      `kong.client.get_consumer/get_consumer_groups failed (Kong 3.4+ needed for groups), the request gets the tenant the rest names: ${boundedDetail(e)}`,
    );
  }
  const header = p.tenant_from.includes('header') ? headerTenant(headers, p.tenant_header) : null;
  return { consumer, consumerGroups, headerTenant: header };
}
