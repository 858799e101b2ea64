/**
 * Rate-limited diagnostics: at most one line per key per interval, with a count of the lines suppressed
 * since, so a failing Redis cannot flood the log at request rate.
 *
 * Lines wait here for the next log phase, which hands them to Kong with kong.log.warn (kinference.ts): off
 * the request path, and at a level Kong's default `log_level = notice` shows. The plugin server's own
 * stderr also reaches Kong's error.log, but Kong copies it at INFO (runloop/plugin_servers/process.lua), so
 * by default nobody sees it: stderr is only the overflow, when lines pile up without a log phase to take
 * them. Never stdout: Kong parses the query command's stdout as JSON.
 */
const INTERVAL_MS = 60_000;
const MAX_QUEUED = 100;
/** Keys can carry error text: past this many, the oldest key is forgotten (its next line is not held back). */
const MAX_KEYS = 1000;
const last = new Map<string, { atMs: number; suppressed: number }>();
let queued: string[] = [];

export function writeStderr(line: string): void {
  process.stderr.write(`[kinference] ${line}\n`);
}

function emit(line: string): void {
  if (queued.length < MAX_QUEUED) queued.push(line);
  else writeStderr(line);
}

export function logOnce(key: string, message: string, nowMs: number = Date.now()): boolean {
  const prev = last.get(key);
  if (prev && nowMs - prev.atMs < INTERVAL_MS) {
    prev.suppressed++;
    return false;
  }
  const extra = prev && prev.suppressed > 0 ? ` (${prev.suppressed} similar suppressed)` : '';
  if (!prev && last.size >= MAX_KEYS) last.delete(last.keys().next().value!);
  last.set(key, { atMs: nowMs, suppressed: 0 });
  emit(`${message}${extra}`);
  return true;
}

/** Keys on record (diagnostics: the map is bounded by MAX_KEYS). */
export function logOnceKeys(): number {
  return last.size;
}

/** The lines waiting for Kong; the caller writes them (or, when Kong refuses, to stderr). */
export function takeLogLines(): string[] {
  const lines = queued;
  queued = [];
  return lines;
}
