// The benchmark scripts' command-line helpers: usage errors (exit 2) and checked numeric flags.
import { parseArgs, type ParseArgsConfig } from 'node:util';

type Options = NonNullable<ParseArgsConfig['options']>;
type Values<O extends Options> = ReturnType<
  typeof parseArgs<{ args: string[]; options: O; strict: true }>
>['values'];

/** A command line that cannot be run as given: printed with the usage, exit status 2. */
export class UsageError extends Error {}

const NUMBER_RULES = {
  positive: { ok: (x: number) => x > 0 && Number.isFinite(x), expected: 'a number > 0' },
  'whole ≥ 1': { ok: (x: number) => Number.isInteger(x) && x >= 1, expected: 'a whole number ≥ 1' },
  'whole ≥ 0': { ok: (x: number) => Number.isInteger(x) && x >= 0, expected: 'a whole number ≥ 0' },
};

/** `--flag v` as a number, or a UsageError naming the flag and what it must be. */
export function numberArg(flag: string, v: string, rule: keyof typeof NUMBER_RULES): number {
  const x = Number(v);
  if (v.trim() === '' || !NUMBER_RULES[rule].ok(x))
    throw new UsageError(`--${flag} ${v}: expected ${NUMBER_RULES[rule].expected}`);
  return x;
}

/** Prints `script: message`, then the usage, and exits 2 (a usage error, as every shell tool does). */
export function exitWithUsage(script: string, usage: string, message: string): never {
  console.error(`${script}: ${message}\n\n${usage}`);
  process.exit(2);
}

/** Runs `f`, which checks option values; a UsageError it throws exits 2 with the usage, as `benchArgs` does. */
export function orUsage<T>(script: string, usage: string, f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    return exitWithUsage(script, usage, e.message);
  }
}

/**
 * A benchmark command's options. `--help` prints the usage and exits 0 before anything runs (a benchmark
 * that ignored its arguments would start on `--help` and overwrite its committed results); an unknown or
 * malformed option exits 2 with the usage instead of a stack trace.
 */
export function benchArgs<const O extends Options>(
  script: string,
  usage: string,
  options: O,
  argv: string[] = process.argv.slice(2),
): Values<O> {
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(usage);
    process.exit(0);
  }
  try {
    return parseArgs({ args: argv, options, strict: true }).values as Values<O>;
  } catch (e) {
    return exitWithUsage(script, usage, (e as Error).message);
  }
}

/**
 * A run count from the environment (`KINF_BENCH_*`), `fallback` when unset or empty. Anything but a whole
 * number ≥ 1 exits 2 naming the variable, before the benchmark starts (it would otherwise run with NaN).
 */
export function envCount(script: string, name: string, fallback: number): number {
  const v = process.env[name];
  if (v === undefined || v.trim() === '') return fallback;
  const x = Number(v);
  if (!Number.isInteger(x) || x < 1) {
    console.error(`${script}: ${name}=${v}: expected a whole number ≥ 1 (default ${fallback})`);
    process.exit(2);
  }
  return x;
}

/** A benchmark that takes no options: `--help` prints what it does; anything else is a usage error. */
export function noOptions(script: string, description: string): void {
  benchArgs(script, `npm run ${script}: ${description}\n\nIt takes no options.`, {});
}
