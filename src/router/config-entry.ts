// configEntry: a config map looked up by a request-supplied name without reaching Object.prototype.
/**
 * `rec[key]` for config maps keyed by request-supplied names: a model named "constructor" or "__proto__"
 * must not find Object.prototype's members (a function as the base model, `.map` of a function).
 */
export function configEntry<T>(rec: Readonly<Record<string, T>> | undefined, key: string): T | undefined {
  return rec !== undefined && Object.hasOwn(rec, key) ? rec[key] : undefined;
}
