import { createRouter, type RouteOutcome, type Router } from '../../../src/router/router.js';
import type { PluginConfig } from '../../../src/config/plugin-config.js';
import type { KvIndex } from '../../../src/index/kv-index.js';
import type { ChatTemplate, PromptTokenizer } from '../../../src/tokenize/types.js';
import type { Arm, ArmDecision } from '../arms/types.js';

/**
 * The kinference arm: the REAL router (src/router: parse → template → tokenize → block keys → index lookup
 * → predictTtft → choose, with reservations and the online TTFT correction) over an index fed only by the
 * collector path. Its clock is the simulation's. A fallback that leaves Kong's default target goes to the
 * service URL, the first pod, as Kong would.
 */
export function kinferenceArm(
  config: PluginConfig,
  index: KvIndex,
  template: ChatTemplate,
  promptTokenizer: PromptTokenizer,
  clock: () => number,
  name: 'kinference' | 'kinference-slo' = 'kinference',
): Arm & { router: Router; fallbacks: Map<string, number> } {
  const router = createRouter(
    config,
    { index, template: () => template, promptTokenizer: () => promptTokenizer },
    { clock },
  );
  const fallbacks = new Map<string, number>();
  return {
    name,
    router,
    fallbacks,
    async choose(req, pods): Promise<ArmDecision> {
      const outcome = await router.route(req.body);
      if (outcome.fallbackReason)
        fallbacks.set(outcome.fallbackReason, (fallbacks.get(outcome.fallbackReason) ?? 0) + 1);
      if (outcome.shed)
        return { podId: '', token: outcome, rejected: { retryAfterMs: outcome.shed.retryAfterS * 1000 } };
      const podId = outcome.target?.podId ?? pods[0]!.id;
      const { cached, tokenized } = outcome.promptChars;
      const share = cached + tokenized > 0 ? tokenized / (cached + tokenized) : 1;
      return {
        podId,
        token: outcome,
        tokenizedTokens: Math.round(outcome.promptTokens * share),
        kvReuseReport: outcome.kvReuseReport,
      };
    },
    onComplete(d, _req, _nowMs, _responseMs, ttftMs) {
      // The plugin's log phase: proxy latency ≈ time to first byte, fed back to the router.
      if (d.token) router.observe(d.token as RouteOutcome, ttftMs);
    },
  };
}
