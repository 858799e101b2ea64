// `kinference explain`: routes one body with the fleet file's router and prints the decision as JSON.
import { readFileSync } from 'node:fs';
import { loadFleetConfig, resolveModel } from '../config/fleet-config.js';
import { KinferenceError } from '../core/errors.js';
import type { Prediction } from '../core/predictor.js';
import { createRouter, defaultResources, type RouteOutcome } from '../router/index.js';
import { pluginConfigFromFleet } from '../router/from-fleet.js';
import { loadTokenizer } from '../tokenize/load-tokenizer.js';

const round = (x: number): number => Math.round(x * 100) / 100;

function candidateJson(p: Prediction) {
  return {
    pod: p.podId,
    address: p.address,
    healthy: p.healthy,
    cached_tokens: p.cachedTokens,
    cpu_tier_tokens: p.cpuTokens,
    uncached_tokens: p.uncachedTokens,
    running: p.running,
    waiting: p.waiting,
    queued_tokens: p.queuedTokens,
    queue_ms: round(p.queueMs),
    prefill_ms: round(p.prefillMs),
    load_ms: round(p.loadMs),
    interference_ms: round(p.interferenceMs),
    overhead_ms: round(p.overheadMs),
    correction_factor: round(p.ttftFactor),
    predicted_ttft_ms: round(p.predictedTtftMs),
    predicted_itl_ms: p.predictedItlMs === null ? null : round(Math.min(p.predictedItlMs, 1e9)),
    within_itl: p.withinItl,
    index_age_ms: p.indexAgeMs,
    cache_credit: round(p.cacheCredit),
    index_partial_since_ms: p.partialSinceMs,
    reasons: p.reasons,
  };
}

/** The JSON `explain` prints: the same decision the plugin would make (docs/collector.md#running-it). */
export function explainJson(o: RouteOutcome) {
  const chosen = o.decision.chosen;
  return {
    model: o.model,
    lora: o.lora,
    prompt_tokens: o.promptTokens,
    blocks: o.blocks,
    truncated: o.truncated,
    fallback_reason: o.fallbackReason,
    fallback_detail: o.fallbackDetail,
    chosen: chosen
      ? { pod: chosen.podId, address: chosen.address, predicted_ttft_ms: round(chosen.predictedTtftMs) }
      : null,
    target: o.target,
    shed: o.shed,
    kv_reuse_report: o.kvReuseReport,
    candidates: o.decision.candidates.map(candidateJson),
    timings_ms: Object.fromEntries(
      Object.entries(o.timings).map(([k, v]) => [k.replace(/Ms$/, ''), round(v)]),
    ),
  };
}

export async function runExplain(configPath: string, bodyPath: string): Promise<void> {
  const fleet = loadFleetConfig(configPath);
  let body: Buffer;
  try {
    body = readFileSync(bodyPath);
  } catch (e) {
    throw new KinferenceError('KINF_ERR_CONFIG_FILE', `${bodyPath}: cannot read: ${(e as Error).message}`, {
      cause: e,
    });
  }
  // The model decides which tokenizer and pods apply; an unparseable body still gets an answer (fallback).
  let requested: string | undefined;
  try {
    const parsed: unknown = JSON.parse(body.toString('utf8'));
    if (parsed && typeof parsed === 'object' && 'model' in parsed && typeof parsed.model === 'string')
      requested = parsed.model;
  } catch {
    /* routed as not-JSON below */
  }
  const resolved = requested ? resolveModel(fleet, requested) : null;
  const model = resolved?.model ?? Object.keys(fleet.models)[0]!;
  if (requested && !resolved)
    process.stderr.write(
      `kinference: model "${requested}" is not in ${configPath}; using ${model}'s settings\n`,
    );
  const config = pluginConfigFromFleet(fleet, model, configPath);
  const router = createRouter(config, defaultResources(config));
  try {
    const outcome = await router.route(body);
    // Which engine tokenized plain text (js-bpe, or native and why): the first thing to check on a mismatch.
    const tokenizer = { spec: config.tokenizer, engine: loadTokenizer(config.tokenizer).engine };
    process.stdout.write(JSON.stringify({ ...explainJson(outcome), tokenizer }, null, 2) + '\n');
  } finally {
    await router.close();
  }
}
