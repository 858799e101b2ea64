// waitFor: polls until a condition holds or a timeout passes, for readiness in tests, benches and the demo.
/**
 * Polls `check` until it resolves truthy, or throws after `timeoutMs` (an error `check` threw is quoted).
 * For readiness (a server started, a cluster agreed), never for sleeping.
 */
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
