// Whether a cell's live and discrete-event runs agree per arm: TTFT median, p95 and mean, bootstrap CIs.
import { bootstrapChange, meanOf, percentileOf, type StatChange } from '../stats/bootstrap.js';
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
  /**
   * live vs DES: relative change of the TTFT median, p95 and mean, bootstrap CI (clusters resampled per
   * mode). Where TTFT is bimodal (cache hits vs full prefills) the median can sit in either mode from one
   * realization to the next; the mean weighs both.
   */
  ttft: { median: StatChange; p95: StatChange; mean: StatChange };
  /**
   * The DES twin's TTFT median, p95 and mean over its realizations (the twin, then replicates whose path timing is
   * jittered by a few ms): how far the cell's outcome moves with the path's timing. Null without replicates.
   */
  realizations: {
    n: number;
    median: [number, number];
    p95: [number, number];
    mean: [number, number];
  } | null;
  /** Per statistic: the 95% CI of live/DES − 1 covers 0. */
  agreeOn: { median: boolean; p95: boolean; mean: boolean };
  /** Within noise: agreeOn the TTFT median and the p95. */
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
  const [median, p95, mean] = bootstrapChange(
    [d],
    [l],
    ttft,
    [percentileOf(0.5), percentileOf(0.95), meanOf],
    { resamples, seed, paired: false },
  ) as [StatChange, StatChange, StatChange];
  const covers = (q: StatChange): boolean => q.ci95[0] <= 0 && q.ci95[1] >= 0;
  const agreeOn = { median: covers(median), p95: covers(p95), mean: covers(mean) };
  const liveSummary = summarizeRequests(l);
  let realizations: ArmAgreement['realizations'] = null;
  if (replicates.length > 0) {
    const all = [des, ...replicates].map((c) => summarizeRequests(windowed(c)).ttft_ms);
    const range = (xs: number[]): [number, number] => [Math.min(...xs), Math.max(...xs)];
    realizations = {
      n: all.length,
      median: range(all.map((x) => x.median)),
      p95: range(all.map((x) => x.percentiles.p95)),
      mean: range(all.map((x) => x.mean)),
    };
  }
  return {
    arm,
    des: summarizeRequests(d),
    live: liveSummary,
    desN: d.length,
    liveN: l.length,
    ttft: { median, p95, mean },
    realizations,
    agreeOn,
    agree: agreeOn.median && agreeOn.p95,
  };
}
