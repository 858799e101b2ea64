/**
 * Router config for specs that route over an index they seeded themselves. No collector runs to keep seeded
 * pods fresh (a collector refreshes last_event_at_ms every second while its stream is up), and a loaded
 * machine can take longer than the default stale_after_ms (10 s) between seeding and the first request: the
 * index would go stale, its cached credit be discounted and, with every pod stale, the request go
 * least-loaded. Specs whose subject is staleness set their own.
 */
export const SEEDED_INDEX_CONFIG = { stale_after_ms: 3_600_000 } as const;
