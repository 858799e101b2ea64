// Token rate limits, concurrency caps and daily budgets shared through Redis: the one entry point.
export { TokenLimiter, type TokenLimiterOptions } from './token-limiter.js';
export { MemoryLimitStore } from './memory-store.js';
export { RedisLimitStore, type RedisLimitStoreOptions } from './redis-store.js';
export type { LimitStore } from './store.js';
export { BUDGET_UNITS, SLOT_TTL_MS, limitsConfigured, planRequest } from './plan.js';
export { hashTagOf, scopeBase } from './limit-keys.js';
export { KEY_MARGIN_MS, WINDOW_MS, windowAt } from './windows.js';
export type { ActualUsage, AdmitReply, LimitPlan, LimitRequest, LimitTicket, LimitVerdict } from './types.js';
