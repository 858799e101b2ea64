// isRecord, the plain-JSON-object guard every request and config parser uses before reading fields.
/** A plain JSON object (not null, not an array): the shape every parser here checks before reading fields. */
export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
