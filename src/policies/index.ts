// Tenants and policies: the one entry point (config section and its checks, tenant identity).
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
