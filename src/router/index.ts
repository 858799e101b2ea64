export {
  createRouter,
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
  routerStats,
  sweepRouters,
} from './resources.js';
export { requestKeys } from './request-keys.js';
