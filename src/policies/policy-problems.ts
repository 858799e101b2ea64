// The rules of the policies section that span fields, each problem naming its field (policies.…).
import type { Policies } from './policy-config.js';

/**
 * What Kong's per-field checks cannot see in a policies section: names that must exist or be unique, matches
 * that must name something, prices that must price something. Each problem is "field: what is wrong".
 */
export function policyProblems(p: Policies | undefined): string[] {
  if (p === undefined) return [];
  const out: string[] = [];
  const classNames = new Set<string>();
  p.classes.forEach((c, i) => {
    if (classNames.has(c.name)) out.push(`policies.classes.${i}.name: "${c.name}" is defined twice`);
    classNames.add(c.name);
  });
  const known = `one of ${[...classNames].map((n) => `"${n}"`).join(', ')}`;
  if (!classNames.has(p.default_class))
    out.push(`policies.default_class: "${p.default_class}" is not a class (${known})`);
  const sources = new Set<string>();
  p.tenant_from.forEach((s, i) => {
    if (sources.has(s)) out.push(`policies.tenant_from.${i}: "${s}" is listed twice`);
    sources.add(s);
  });
  p.tenants.forEach((t, i) => {
    const where = `policies.tenants.${i}`;
    if (Object.keys(t.match).length === 0)
      out.push(`${where}.match: names nothing (give consumer, consumer_group or tenant)`);
    if (t.class !== undefined && !classNames.has(t.class))
      out.push(`${where}.class: "${t.class}" is not a class (${known})`);
    if (t.daily_budget > 0 && p.prices === undefined)
      out.push(`${where}.daily_budget: a budget needs policies.prices to price requests`);
  });
  p.rate_limits.forEach((r, i) => {
    const seen = new Set<string>();
    r.limits.forEach((l, j) => {
      const k = `${l.tokens}/${l.window}`;
      if (seen.has(k))
        out.push(`policies.rate_limits.${i}.limits.${j}: a second ${l.tokens}-token limit per ${l.window}`);
      seen.add(k);
    });
  });
  for (const [model, price] of Object.entries(p.prices ?? {})) {
    const where = `policies.prices.${model === '' ? '(empty name)' : model}`;
    if (model === '') out.push(`policies.prices: a model name is empty`);
    const perToken =
      price.input_per_million !== undefined ||
      price.cached_input_per_million !== undefined ||
      price.output_per_million !== undefined;
    if (!perToken && price.gpu_hour === undefined)
      out.push(`${where}: prices nothing (give input/cached_input/output_per_million, or gpu_hour)`);
  }
  return out;
}
