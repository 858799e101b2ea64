// Prometheus text exposition → flat samples (name with suffix, labels, value).
import parsePrometheusTextFormat from 'parse-prometheus-text-format';

/** One exposed series: its full name (with _total/_sum/_count/_bucket suffix), labels and value. */
export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

function toNumber(s: string | undefined): number {
  if (s === undefined) return Number.NaN;
  if (s === '+Inf' || s === 'Inf') return Number.POSITIVE_INFINITY;
  if (s === '-Inf') return Number.NEGATIVE_INFINITY;
  return Number(s);
}

/**
 * Prometheus text exposition → flat samples. Parsing (escapes, label syntax, values) is done by
 * parse-prometheus-text-format. Its histogram grouping, though, keeps only unlabelled samples: a labelled
 * histogram (every vLLM one: {engine, model_name}) loses its labels, _sum and _count. So we drop the
 * `# TYPE`/`# HELP` lines first: every series is then parsed as an untyped family under its exposed name,
 * which loses nothing.
 */
export function parsePromText(text: string): PromSample[] {
  const body = text
    .split('\n')
    .filter((l) => !l.trimStart().startsWith('#'))
    .join('\n');
  const out: PromSample[] = [];
  // A trailing newline matters: the parser drops a last sample line that lacks one.
  for (const fam of parsePrometheusTextFormat(`${body}\n`))
    for (const m of fam.metrics)
      out.push({ name: fam.name, labels: m.labels ?? {}, value: toNumber(m.value) });
  return out;
}
