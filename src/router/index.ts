// The router's public surface: createRouter, its outcome types, per-config routers and requestKeys.
export {
  createRouter,
  emptyOutcome,
  type Router,
  type RouteOutcome,
  type RouteTarget,
  type RouteTimings,
  type RouterResources,
  type RouterStats,
} from './router.js';
export {
  configRouter,
  closeAllRouters,
  routerCacheKey,
  defaultResources,
  preloadResources,
  resourcesSettled,
  routerStats,
  sweepRouters,
} from './resources.js';
export { requestKeys } from './request-keys.js';
export { closeDecisionPool, runningDecisionPool, workersWanted } from './decision-pool.js';
