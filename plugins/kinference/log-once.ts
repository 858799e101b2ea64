/**
 * Rate-limited diagnostics to stderr (the plugin server copies it into Kong's error.log). Never stdout: Kong
 * parses the query command's stdout as JSON. At most one line per key per interval, with a count of the
 * lines suppressed since, so a failing Redis cannot flood the log at request rate.
 */
const INTERVAL_MS = 60_000;
const last = new Map<string, { atMs: number; suppressed: number }>();

export function logOnce(key: string, message: string, nowMs: number = Date.now()): boolean {
  const prev = last.get(key);
  if (prev && nowMs - prev.atMs < INTERVAL_MS) {
    prev.suppressed++;
    return false;
  }
  const extra = prev && prev.suppressed > 0 ? ` (${prev.suppressed} similar suppressed)` : '';
  last.set(key, { atMs: nowMs, suppressed: 0 });
  process.stderr.write(`[kinference] ${message}${extra}\n`);
  return true;
}
