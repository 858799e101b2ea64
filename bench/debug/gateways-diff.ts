/**
 * `npx tsx bench/debug/gateways-diff.ts [bench/results/gateways-live.json]`: why a shared-prefix cell of
 * bench:gateways lost prefix hits at N nodes. For every request it finds the shared prefix (the
 * conversation's cluster, rebuilt from the seed) and counts the misses: requests that paid for their prefix
 * on a pod (cached < 90% of the prefix) while an earlier request of the same prefix, not yet answered (its KV
 * events pending), had gone to another pod, split by whether that earlier one went through the same node
 * (its router credits the pending prefix) or another one (nothing tells this node about that prefix).
 */
import { readFileSync } from 'node:fs';
import type { CompactRecord } from '../lib/live/compact-record.js';
import type { NodeDecision } from '../lib/live/spread-cell.js';
import { SEED_SCHEDULE } from '../lib/schedule.js';
import { loadModelSetup } from '../lib/setup.js';
import { WorkloadFactory } from '../lib/workload/workloads.js';

type Rec = CompactRecord & Partial<NodeDecision>;
const file = process.argv[2] ?? 'bench/results/gateways-live.json';
const doc = JSON.parse(readFileSync(file, 'utf8')) as {
  meta: { seed: number; trial: number };
  requests: Record<string, Rec[]>;
};
const s = SEED_SCHEDULE;
const model = await loadModelSetup();
const factory = new WorkloadFactory('shared-prefix', s.shapes, model.synth, doc.meta.seed, doc.meta.trial);
const prefixTokens = s.shapes['shared-prefix'].prefixTokens;
const clusterOf = (key: string): string => factory.conversation(Number(/-c(\d+)\//.exec(key)![1])).cluster;

for (const [cell, recs] of Object.entries(doc.requests)) {
  if (!cell.startsWith('shared-prefix:')) continue;
  const done = recs.filter((r) => r.ttftMs !== null && r.pod.startsWith('pod-'));
  done.sort((a, b) => a.startMs - b.startMs);
  let missSameNode = 0;
  let missOtherNode = 0;
  let missNoneInFlight = 0;
  let hits = 0;
  const podsPerPrefix = new Map<string, Set<string>>();
  for (const [i, r] of done.entries()) {
    const c = clusterOf(r.key);
    if (!podsPerPrefix.has(c)) podsPerPrefix.set(c, new Set());
    podsPerPrefix.get(c)!.add(r.pod);
    if (r.cachedTokens >= 0.9 * prefixTokens) {
      hits++;
      continue;
    }
    // An earlier request of this prefix whose first token (so its prefill, so its KV events) came after r started.
    const inFlight = done
      .slice(0, i)
      .filter((e) => clusterOf(e.key) === c && e.startMs + e.ttftMs! > r.startMs && e.pod !== r.pod);
    if (inFlight.length === 0) missNoneInFlight++;
    else if (inFlight.some((e) => e.node === r.node)) missSameNode++;
    else missOtherNode++;
  }
  const spread = [...podsPerPrefix.values()].map((p) => p.size);
  console.log(
    `${cell}: ${done.length} answered, ${hits} with the prefix cached; misses: ${missNoneInFlight} with no ` +
      `request of their prefix in flight elsewhere, ${missSameNode} while one sent by the same node was, ` +
      `${missOtherNode} while only ones sent by other nodes were; pods per prefix ${spread.join(',')} ` +
      `(mean ${(spread.reduce((a, x) => a + x, 0) / spread.length).toFixed(2)})`,
  );
}
