// Tenant usage and cost: prices, output-token estimates, usage records in Redis (write and read).
export {
  estimateCost,
  priceFor,
  tokenPrices,
  type CostEstimate,
  type PodSpeeds,
  type PriceSource,
  type TokenCounts,
  type TokenPrices,
} from './prices.js';
export {
  TEXT_BYTES_PER_TOKEN,
  chatChunkBytes,
  estimateOutputTokens,
  headerBytes,
  type HeaderMap,
  type OutputEstimate,
  type SentResponse,
} from './output-tokens.js';
export {
  DEFAULT_MAX_TENANTS_PER_HOUR,
  OVERFLOW_TENANT,
  TTFT_BUCKETS_MS,
  USAGE_FIELDS,
  hourOf,
  hourStartMs,
  metricsKey,
  ttftBucket,
  usageIncrements,
  zeroTotals,
  type UsageEvent,
  type UsageField,
  type UsageTotals,
} from './record.js';
export { UsageWriter, type UsageWriterOptions } from './writer.js';
export {
  addTotals,
  hoursBetween,
  readFleetTotals,
  readUsage,
  type FleetTotals,
  type UsageRow,
} from './read.js';
export { createUsageRedis, type UsageRedisOptions } from './redis-client.js';
