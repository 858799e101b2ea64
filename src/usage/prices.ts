// Per-token prices (from the table, or a GPU-hour price over the pod's speeds) and a request's cost.
import type { Price } from '../policies/index.js';

/** Milliseconds in an hour: a GPU-hour price over this is the price of one GPU-millisecond. */
const MS_PER_HOUR = 3.6e6;

/** Price of one token of each type, in the config's currency; null: unknown (never read as zero). */
export interface TokenPrices {
  input: number | null;
  cachedInput: number | null;
  output: number | null;
  /** How each price was found: the price table, or gpu_hour over the pod's measured speeds. */
  source: { input: PriceSource; cachedInput: PriceSource; output: PriceSource };
}
export type PriceSource = 'table' | 'gpu_hour' | 'unknown';

/**
 * What the chosen pod's GPUs spend per token, from the collector's calibration of that pod: prefill ms per
 * uncached prompt token, and one decode step shared by the requests decoding in it.
 */
export interface PodSpeeds {
  prefillMsPerToken: number;
  decodeStepMs: number;
  /** Requests decoding on the pod besides this one (a decode step makes one token for each). */
  running: number;
}

/** The price entry of a model: its own, or `*`; null when neither is in the table. */
export function priceFor(
  prices: Readonly<Record<string, Price>> | undefined,
  model: string | null,
): Price | null {
  if (!prices) return null;
  if (model !== null && Object.hasOwn(prices, model)) return prices[model]!;
  return Object.hasOwn(prices, '*') ? prices['*']! : null;
}

/**
 * Per-token prices. A per-million price given in the table wins; a missing one is derived from gpu_hour and
 * the pod's speeds when both are known, else it is unknown:
 *   prefill $/token = gpu_hour × gpus_per_pod × prefillMsPerToken / 3.6e6
 *   decode  $/token = gpu_hour × gpus_per_pod × decodeStepMs / (running + 1) / 3.6e6
 * (a decode step makes one token for each request in the batch, this one included, so they share its cost).
 * A cached prompt token derived from gpu_hour costs 0: its prefill is skipped, and the KV memory holding it
 * is the pod's whether used or not; give cached_input_per_million to charge for cache reads.
 */
export function tokenPrices(price: Price | null, speeds: PodSpeeds | null): TokenPrices {
  const perM = (v: number | undefined): number | null => (v === undefined ? null : v / 1e6);
  const gpuMsPrice =
    price?.gpu_hour !== undefined && speeds !== null
      ? (price.gpu_hour * (price.gpus_per_pod ?? 1)) / MS_PER_HOUR
      : null;
  const pick = (given: number | null, derived: () => number): [number | null, PriceSource] =>
    given !== null ? [given, 'table'] : gpuMsPrice !== null ? [derived(), 'gpu_hour'] : [null, 'unknown'];
  const [input, si] = pick(perM(price?.input_per_million), () => gpuMsPrice! * speeds!.prefillMsPerToken);
  const [cachedInput, sc] = pick(perM(price?.cached_input_per_million), () => 0);
  const [output, so] = pick(
    perM(price?.output_per_million),
    () => (gpuMsPrice! * speeds!.decodeStepMs) / (Math.max(0, speeds!.running) + 1),
  );
  return { input, cachedInput, output, source: { input: si, cachedInput: sc, output: so } };
}

/** A request's tokens by type: cached prompt tokens are their own type, priced with their own price. */
export interface TokenCounts {
  /** Prompt tokens in all (cached included). */
  promptTokens: number;
  /** Prompt tokens served from the KV cache (predicted at admission; at most promptTokens). */
  cachedTokens: number;
  outputTokens: number;
}

export interface CostEstimate {
  /** uncached × input + cached × cached input + output × output; null when a price a count needs is unknown. */
  cost: number | null;
  /** What the cached tokens saved: cached × (input − cached input); null when either price is unknown. */
  saving: number | null;
}

/**
 * The cost of a request (pure: the limits' daily budget and the quote header call it with the admission's
 * counts, the usage record with the log phase's). A token type with a count of 0 needs no price: a request
 * with no cached tokens has a cost without a cached-input price. Unknown is null, never 0.
 */
export function estimateCost(tokens: TokenCounts, prices: TokenPrices): CostEstimate {
  const cached = Math.max(0, Math.min(tokens.cachedTokens, tokens.promptTokens));
  const uncached = Math.max(0, tokens.promptTokens - cached);
  const output = Math.max(0, tokens.outputTokens);
  const term = (n: number, p: number | null): number | null => (n === 0 ? 0 : p === null ? null : n * p);
  const parts = [term(uncached, prices.input), term(cached, prices.cachedInput), term(output, prices.output)];
  const cost = parts.some((x) => x === null) ? null : parts.reduce((a, b) => a! + b!, 0)!;
  const saving =
    cached === 0
      ? 0
      : prices.input === null || prices.cachedInput === null
        ? null
        : cached * (prices.input - prices.cachedInput);
  return { cost, saving };
}
