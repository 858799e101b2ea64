import { parseArgs, type ParseArgsConfig } from 'node:util';

type Options = NonNullable<ParseArgsConfig['options']>;
type Values<O extends Options> = ReturnType<
  typeof parseArgs<{ args: string[]; options: O; strict: true }>
>['values'];

/** A command line that cannot be run as given: printed with the usage, exit status 2. */
export class UsageError extends Error {}

/** `--flag v` as a number, or a UsageError naming the flag and what it must be. */
export function numberArg(flag: string, v: string, rule: 'positive' | 'whole ≥ 1' | 'whole ≥ 0'): number {
  const x = Number(v);
  const ok =
    v.trim() !== '' &&
    (rule === 'positive'
      ? x > 0 && Number.isFinite(x)
      : Number.isInteger(x) && x >= (rule === 'whole ≥ 1' ? 1 : 0));
  if (!ok)
    throw new UsageError(
      `--${flag} ${v}: expected a ${rule === 'positive' ? 'number > 0' : `${rule.replace('whole', 'whole number')}`}`,
    );
  return x;
}

/** Prints `script: message`, then the usage, and exits 2 (a usage error, as every shell tool does). */
export function exitWithUsage(script: string, usage: string, message: string): never {
  console.error(`${script}: ${message}\n\n${usage}`);
  process.exit(2);
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

/** A benchmark that takes no options: `--help` prints what it does; anything else is a usage error. */
export function noOptions(script: string, description: string): void {
  benchArgs(script, `npm run ${script}: ${description}\n\nIt takes no options.`, {});
}
