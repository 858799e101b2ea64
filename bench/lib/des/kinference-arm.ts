// The kinference arm: the real router over an index fed only by the pods' KV events, in virtual time.
import { createRouter, type RouteOutcome, type Router } from '../../../src/router/router.js';
import type { PluginConfig } from '../../../src/config/plugin-config.js';
import type { KvIndex } from '../../../src/index/index.js';
import type { TokenLimiter } from '../../../src/limits/index.js';
import type { ChatTemplate, PromptTokenizer } from '../../../src/tokenize/types.js';
import type { Arm, ArmDecision } from '../arms/types.js';

/**
 * The kinference arm: the REAL router (src/router: parse → template → tokenize → block keys → index lookup
 * → predictTtft → choose, with reservations and the online TTFT correction) over an index fed only by the
 * collector path. Its clock is the simulation's. A fallback that leaves Kong's default target goes to the
 * service URL, the first pod, as Kong would. `gateways` > 1: that many Kong nodes, each with its own router
 * (its own reservations and memory of sends) over the one index, taking requests in turn (a load balancer in
 * front of them, each request on a fresh connection): a conversation's turns land on any of them. `limiter`:
 * the token limits (src/limits, a memory store on the virtual clock), one for every node as one Redis is.
 * A request's caller facts (req.caller) name its tenant when the config has policies. Class admission's
 * wait (max_wait_ms) is the run's: a `wait` outcome is held by the event loop and re-decided (`redecide`, the
 * same router, with the first outcome's deadline) as the plugin's access phase does.
 */
export function kinferenceArm(
  config: PluginConfig,
  index: KvIndex,
  template: ChatTemplate,
  promptTokenizer: PromptTokenizer,
  clock: () => number,
  name: 'kinference' | 'kinference-slo' = 'kinference',
  gateways = 1,
  limiter: TokenLimiter | null = null,
): Arm & { router: Router; fallbacks: Map<string, number> } {
  const routers = Array.from({ length: gateways }, () =>
    createRouter(
      config,
      { index, template: () => template, promptTokenizer: () => promptTokenizer, limiter },
      { clock },
    ),
  );
  const router = routers[0]!;
  const routerOf = new WeakMap<RouteOutcome, Router>();
  const fallbacks = new Map<string, number>();
  let sent = 0;
  /** The arm's decision from the router's outcome; a fallback that leaves Kong's target goes to `kongTarget`. */
  const decisionOf = (outcome: RouteOutcome, kongTarget: string): ArmDecision => {
    if (outcome.fallbackReason)
      fallbacks.set(outcome.fallbackReason, (fallbacks.get(outcome.fallbackReason) ?? 0) + 1);
    const trace = {
      admission: outcome.admission?.action ?? null,
      predictedTtftMs: outcome.decision.chosen?.predictedTtftMs ?? null,
      detail: outcome.admission?.detail ?? null,
    };
    const verdict = outcome.limit?.verdict;
    if (verdict && !verdict.admitted)
      return {
        podId: '',
        token: outcome,
        trace,
        rejected: { retryAfterMs: verdict.retryAfterS * 1000, by: 'limit' },
      };
    if (outcome.shed)
      return {
        podId: '',
        token: outcome,
        trace,
        rejected: {
          retryAfterMs: outcome.shed.retryAfterS * 1000,
          by: outcome.admission?.action === 'shed' ? 'class' : 'shed',
        },
      };
    const a = outcome.admission;
    if (a?.action === 'wait' && a.waitUntilMs !== null)
      return { podId: '', token: outcome, trace, wait: { untilMs: a.waitUntilMs, priority: a.priority } };
    const podId = outcome.target?.podId ?? kongTarget;
    const { cached, tokenized } = outcome.promptChars;
    const share = cached + tokenized > 0 ? tokenized / (cached + tokenized) : 1;
    return {
      podId,
      token: outcome,
      tokenizedTokens: Math.round(outcome.promptTokens * share),
      kvReuseReport: outcome.kvReuseReport,
      trace,
    };
  };
  return {
    name,
    router,
    fallbacks,
    async choose(req, pods): Promise<ArmDecision> {
      const via = routers[sent++ % gateways]!;
      const outcome = await via.route(req.body, req.caller ?? null, { canWait: true });
      routerOf.set(outcome, via);
      return decisionOf(outcome, pods[0]!.id);
    },
    async redecide(req, first, _nowMs, waitedMs): Promise<ArmDecision> {
      const prior = first.token as RouteOutcome;
      const via = routerOf.get(prior) ?? router;
      const outcome = await via.route(req.body, req.caller ?? null, {
        waitUntilMs: first.wait!.untilMs,
        waitedMs,
      });
      routerOf.set(outcome, via);
      return decisionOf(outcome, ''); // '': the run sends it to the first pod, Kong's target
    },
    onComplete(d, _req, _nowMs, _responseMs, ttftMs) {
      // The plugin's log phase: proxy latency ≈ time to first byte, fed back to the router.
      const outcome = d.token as RouteOutcome | undefined;
      if (outcome) (routerOf.get(outcome) ?? router).observe(outcome, ttftMs);
    },
  };
}
