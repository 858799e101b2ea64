// Tenants and policies: the one entry point (config section, tenant identity, class admission, fairness).
export {
  DEFAULT_CLASSES,
  LimitMatchSchema,
  PoliciesSchema,
  PriceSchema,
  RateLimitPolicySchema,
  ServiceClassSchema,
  TENANT_SOURCES,
  TOKEN_KINDS,
  TenantPolicySchema,
  TokenLimitSchema,
  WINDOWS,
  type LimitMatch,
  type LimitWindow,
  type Policies,
  type Price,
  type RateLimitPolicy,
  type ServiceClass,
  type TenantPolicy,
  type TenantSource,
  type TokenKind,
  type TokenLimit,
} from './policy-config.js';
export { policyProblems } from './policy-problems.js';
export { MAX_TENANT_NAME, resolveTenant, type CallerFacts, type Consumer, type Tenant } from './tenant.js';
export {
  admitByClass,
  blockedOn,
  sheddable,
  type Blocked,
  type ClassVerdict,
  type PendingRequest,
  type PodFacts,
  type ProtectedClass,
} from './class-admission.js';
export { ClassActivity, PROTECT_MS, SQUEEZE_MS } from './class-activity.js';
export { placeByClass, reservedPods, withReserved } from './class-placement.js';
export { FairQueue, VirtualCounters, type FairQueueOptions } from './fair-queue.js';
