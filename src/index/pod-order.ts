// comparePodIds, the one pod order of lookups and listings (UTF-16 code units, locale-independent).
/** The order of pods in lookups and listings: by podId, UTF-16 code units (locale-independent). */
export function comparePodIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
