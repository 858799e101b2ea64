// Kong's request-count rate limiting (the open-source rate-limiting plugin) in front of another arm.
import type { Arm, ArmDecision, ArmRequest, PodView } from './types.js';

/**
 * Kong's `rate-limiting` plugin as a user configures it against a noisy tenant: `limit_by: consumer`, a
 * `minute` limit per consumer, fixed windows aligned to the clock's minute, `policy: redis` (one counter for
 * every node, so one counter here). A request past its consumer's limit is answered 429 with Retry-After =
 * the seconds left in the window (the plugin's own header); the others go on to `inner`. Consumers without
 * a limit pass uncounted. It counts requests: it knows nothing of tokens, classes or the fleet's load.
 */
export function requestLimitArm(
  inner: Arm,
  perMinute: Readonly<Record<string, number>>,
): Arm & { refused: Map<string, number> } {
  const counts = new Map<string, { window: number; n: number }>();
  const refused = new Map<string, number>();
  return {
    name: inner.name,
    refused,
    choose(req: ArmRequest, pods: readonly PodView[], nowMs: number): ArmDecision | Promise<ArmDecision> {
      const consumer = req.caller?.consumer?.username ?? null;
      const limit = consumer === null ? undefined : perMinute[consumer];
      if (consumer !== null && limit !== undefined) {
        const window = Math.floor(nowMs / 60_000);
        const c = counts.get(consumer);
        const n = c && c.window === window ? c.n : 0;
        if (n >= limit) {
          refused.set(consumer, (refused.get(consumer) ?? 0) + 1);
          const retryAfterS = Math.max(1, Math.ceil(((window + 1) * 60_000 - nowMs) / 1000));
          return { podId: '', rejected: { retryAfterMs: retryAfterS * 1000, by: 'request-limit' } };
        }
        counts.set(consumer, { window, n: n + 1 });
      }
      return inner.choose(req, pods, nowMs);
    },
    ...(inner.redecide ? { redecide: inner.redecide.bind(inner) } : {}),
    ...(inner.onComplete ? { onComplete: inner.onComplete.bind(inner) } : {}),
  };
}
