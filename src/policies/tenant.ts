// Who a request is for: its tenant, from the sources the config orders, and the class it may have.
import type { Policies, ServiceClass, TenantPolicy, TenantSource } from './policy-config.js';

/** The authenticated Kong consumer, as kong.client.get_consumer() gives it (the fields we read). */
export interface Consumer {
  id: string;
  username?: string;
  custom_id?: string;
}

/** What the gateway knows of the caller before the body is read; the OpenAI `user` comes from the body. */
export interface CallerFacts {
  consumer: Consumer | null;
  /** Names of the consumer's groups (kong.client.get_consumer_groups), in Kong's order. */
  consumerGroups: string[];
  /** The value of policies.tenant_header, when sent once (several values name nobody). */
  headerTenant: string | null;
}

export interface Tenant {
  /** The tenant's name: a label for usage and limit counters, never a metric label (unbounded). */
  name: string;
  /** What named it; `default` when nothing did. */
  source: TenantSource | 'default';
  /** The service class the request is served in, after the header rule (see resolveTenant). */
  serviceClass: ServiceClass;
  /** The tenant policy that applies (its caps and budget), if any. */
  policy: TenantPolicy | null;
  consumer: Consumer | null;
  consumerGroups: string[];
}

/** Longest tenant name kept; a longer header or `user` value names nobody (it would bloat every key). */
export const MAX_TENANT_NAME = 128;

function nameFrom(source: TenantSource, caller: CallerFacts, user: string | null): string | null {
  const ok = (v: string | null | undefined): string | null =>
    typeof v === 'string' && v.length > 0 && v.length <= MAX_TENANT_NAME ? v : null;
  switch (source) {
    case 'consumer':
      return ok(caller.consumer?.username) ?? ok(caller.consumer?.custom_id) ?? ok(caller.consumer?.id);
    case 'consumer_group':
      return ok(caller.consumerGroups[0]);
    case 'header':
      return ok(caller.headerTenant);
    case 'user':
      return ok(user);
  }
}

/** Does a tenant policy's match hold for this caller and tenant name? Every field given must match. */
function matches(p: TenantPolicy, tenant: string, caller: CallerFacts): boolean {
  const m = p.match;
  const c = caller.consumer;
  if (m.consumer !== undefined && !(c && [c.username, c.custom_id, c.id].includes(m.consumer))) return false;
  if (m.consumer_group !== undefined && !caller.consumerGroups.includes(m.consumer_group)) return false;
  if (m.tenant !== undefined && m.tenant !== tenant) return false;
  return Object.keys(m).length > 0;
}

/** The class of a tenant policy's match, or the default class. */
function classOf(policies: Policies, policy: TenantPolicy | null): ServiceClass {
  const byName = (n: string): ServiceClass | undefined => policies.classes.find((c) => c.name === n);
  return (policy?.class !== undefined ? byName(policy.class) : undefined) ?? byName(policies.default_class)!;
}

/**
 * The request's tenant. Its name comes from the first of `tenant_from` that names one. Its class and caps come
 * from the first tenant policy that matches. The rule that keeps a client from choosing its own class: a name
 * that only the client asserts (a header or the body's `user`) can never raise the class above what the
 * authenticated identity has: the consumer's own policy, or, with no consumer, the default class. It may lower
 * it. So a header naming a premium team gets the premium team's counters only with the premium team's class
 * when the consumer already has that class or better.
 */
export function resolveTenant(policies: Policies, caller: CallerFacts, user: string | null): Tenant {
  let name: string | null = null;
  let source: Tenant['source'] = 'default';
  for (const s of policies.tenant_from) {
    name = nameFrom(s, caller, user);
    if (name !== null) {
      source = s;
      break;
    }
  }
  const tenantName = name ?? policies.default_tenant;
  const policy = policies.tenants.find((p) => matches(p, tenantName, caller)) ?? null;
  let serviceClass = classOf(policies, policy);
  if (source === 'header' || source === 'user') {
    // The class the authenticated identity alone would have; '' names no tenant (tenant names are non-empty).
    const authName = nameFrom('consumer', caller, null) ?? nameFrom('consumer_group', caller, null) ?? '';
    const authPolicy = policies.tenants.find((p) => matches(p, authName, caller)) ?? null;
    const ceiling = classOf(policies, authPolicy);
    if (serviceClass.priority > ceiling.priority) serviceClass = ceiling;
  }
  return {
    name: tenantName,
    source,
    serviceClass,
    policy,
    consumer: caller.consumer,
    consumerGroups: caller.consumerGroups,
  };
}
