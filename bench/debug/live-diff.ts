/**
 * `npx tsx bench/debug/live-diff.ts bench/results/live.json [--arm kinference] [--over-ms 1000]`: pairs
 * every request of bench:live's live run with the same request (same key) of its DES twin and prints those
 * whose TTFT differs by more than --over-ms, with their turn, pod and cached tokens in both modes, then how
 * many in the measure window were hits in each. A diagnosis tool: is a live tail a routing difference (the
 * cache was missed) or a timing one (same hit, slower)?
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type { CompactRecord } from '../lib/live/compact-record.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { arm: { type: 'string', default: 'kinference' }, 'over-ms': { type: 'string', default: '1000' } },
});
const file = positionals[0] ?? 'bench/results/live.json';
const doc = JSON.parse(readFileSync(file, 'utf8')) as {
  meta: { profile: { warmupS: number; measureS: number } };
  requests?: Record<string, { des: CompactRecord[]; live: CompactRecord[] }>;
};
const mode = doc.requests?.[values.arm!];
if (!mode) throw new Error(`${file} has no per-request records for arm ${values.arm}`);
const over = Number(values['over-ms']);
const w0 = doc.meta.profile.warmupS * 1000;
const w1 = w0 + doc.meta.profile.measureS * 1000;
const inWindow = (r: CompactRecord): boolean =>
  r.status === 'successful' && r.endMs !== null && r.endMs >= w0 && r.startMs <= w1;
const des = new Map(mode.des.map((r) => [r.key, r]));
const s = (x: number | null): string => (x === null ? '–' : (x / 1000).toFixed(2));
console.log(
  'key                      turn  start s  | DES ttft  pod     cached/prompt | live ttft  pod     cached/prompt',
);
for (const l of mode.live) {
  const d = des.get(l.key);
  const diff = (l.ttftMs ?? Infinity) - (d?.ttftMs ?? Infinity);
  if (d && Number.isFinite(diff) && Math.abs(diff) <= over) continue;
  console.log(
    `${l.key.padEnd(24)} ${String(l.turn).padStart(4)} ${s(l.startMs).padStart(8)}${inWindow(l) ? '*' : ' '} | ` +
      `${s(d?.ttftMs ?? null).padStart(8)}  ${(d?.pod ?? '–').padEnd(7)} ${`${d?.cachedTokens ?? '–'}/${d?.promptTokens ?? '–'}`.padEnd(13)} | ` +
      `${s(l.ttftMs).padStart(9)}  ${l.pod.padEnd(7)} ${l.cachedTokens}/${l.promptTokens}`,
  );
}
for (const [name, rs] of [
  ['DES', mode.des],
  ['live', mode.live],
] as const) {
  const w = rs.filter(inWindow);
  const hits = w.filter((r) => r.cachedTokens > 0).length;
  const slow = w.filter((r) => (r.ttftMs ?? 0) > over).length;
  console.log(
    `${name}: ${w.length} in the measure window (*), ${hits} hit the cache, ${slow} over ${over} ms`,
  );
}
