/** Structured logs: one JSON object per line on stderr (`ts`, `level`, `msg`, then fields). */
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

function errorFields(v: unknown, depth = 0): unknown {
  if (!(v instanceof Error)) return v;
  const out: Record<string, unknown> = {
    name: v.name,
    message: v.message,
    code: (v as { code?: unknown }).code,
  };
  // fetch() says only "fetch failed"; why (ECONNREFUSED, ENOTFOUND for a mistyped host…) is in its cause.
  if (v.cause !== undefined && depth < 3) out.cause = errorFields(v.cause, depth + 1);
  return out;
}

export function createLogger(
  level: LogLevel = 'info',
  write: (line: string) => void = (l) => process.stderr.write(l),
  base: Record<string, unknown> = {},
): Logger {
  const min = LOG_LEVELS.indexOf(level);
  const emit = (lvl: LogLevel, msg: string, fields?: Record<string, unknown>): void => {
    if (LOG_LEVELS.indexOf(lvl) < min) return;
    const rec: Record<string, unknown> = { ts: new Date().toISOString(), level: lvl, msg, ...base };
    if (fields) for (const [k, v] of Object.entries(fields)) rec[k] = errorFields(v);
    write(`${JSON.stringify(rec, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))}\n`);
  };
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    child: (fields) => createLogger(level, write, { ...base, ...fields }),
  };
}

/** A logger that drops everything (tests, benchmarks). */
export const silentLogger: Logger = createLogger('error', () => {});
