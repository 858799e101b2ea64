import { freeLoopbackPort } from '../../src/util/redis-server.js';

/** A TCP port free on 127.0.0.1 right now (the OS picks it). */
export const freePort = freeLoopbackPort;

/** Polls `check` until it resolves truthy, or throws after `timeoutMs`. For readiness, never for sleeping. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  timeoutMs = 10_000,
  intervalMs = 20,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastErr: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch (e) {
      lastErr = e;
    }
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${lastErr ? `: ${String(lastErr)}` : ''}`,
      );
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
