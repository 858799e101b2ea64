import { bootstrapQuantileChange, type QuantileChange } from '../stats/bootstrap.js';
import {
  inMeasureWindow,
  requestMetrics,
  summarizeRequests,
  type MetricSummaries,
} from '../stats/metrics.js';
import type { RequestRecord } from '../types.js';

export interface ModeCell {
  records: RequestRecord[];
  windowStartMs: number;
  windowEndMs: number;
  wallMs: number;
}

export interface ArmAgreement {
  arm: string;
  des: MetricSummaries;
  live: MetricSummaries;
  desN: number;
  liveN: number;
  /** live vs DES: relative change of TTFT median and p95, bootstrap CI (clusters resampled per mode). */
  ttft: { median: QuantileChange; p95: QuantileChange };
  /**
   * The DES twin's TTFT median and p95 over its realizations (the twin, then replicates whose path timing is
   * jittered by a few ms): how far the cell's outcome moves with the path's timing. Null without replicates.
   */
  realizations: { n: number; median: [number, number]; p95: [number, number] } | null;
  /** Within noise: the 95% CI of live/DES − 1 covers 0 for the TTFT median and the p95. */
  agree: boolean;
}

const ttft = (r: RequestRecord): number | null => requestMetrics(r)?.ttftMs ?? null;

const windowed = (c: ModeCell): RequestRecord[] =>
  c.records.filter((r) => inMeasureWindow(r, c.windowStartMs, c.windowEndMs));

export function compareModes(
  arm: string,
  des: ModeCell,
  live: ModeCell,
  resamples: number,
  seed: number,
  replicates: readonly ModeCell[] = [],
): ArmAgreement {
  const d = windowed(des);
  const l = windowed(live);
  const [median, p95] = bootstrapQuantileChange([d], [l], ttft, [0.5, 0.95], {
    resamples,
    seed,
    paired: false,
  });
  const covers = (q: QuantileChange): boolean => q.ci95[0] <= 0 && q.ci95[1] >= 0;
  const liveSummary = summarizeRequests(l);
  let realizations: ArmAgreement['realizations'] = null;
  if (replicates.length > 0) {
    const all = [des, ...replicates].map((c) => summarizeRequests(windowed(c)).ttft_ms);
    const range = (xs: number[]): [number, number] => [Math.min(...xs), Math.max(...xs)];
    realizations = {
      n: all.length,
      median: range(all.map((x) => x.median)),
      p95: range(all.map((x) => x.percentiles.p95)),
    };
  }
  return {
    arm,
    des: summarizeRequests(d),
    live: liveSummary,
    desN: d.length,
    liveN: l.length,
    ttft: { median: median!, p95: p95! },
    realizations,
    agree: covers(median!) && covers(p95!),
  };
}
