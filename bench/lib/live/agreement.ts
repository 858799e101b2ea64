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
  /** Within noise: the 95% CI of live/DES − 1 covers 0, for the median and the p95. */
  agree: boolean;
}

const ttft = (r: RequestRecord): number | null => requestMetrics(r)?.ttftMs ?? null;

export function compareModes(
  arm: string,
  des: ModeCell,
  live: ModeCell,
  resamples: number,
  seed: number,
): ArmAgreement {
  const d = des.records.filter((r) => inMeasureWindow(r, des.windowStartMs, des.windowEndMs));
  const l = live.records.filter((r) => inMeasureWindow(r, live.windowStartMs, live.windowEndMs));
  const [median, p95] = bootstrapQuantileChange([d], [l], ttft, [0.5, 0.95], {
    resamples,
    seed,
    paired: false,
  });
  const covers = (q: QuantileChange): boolean => q.ci95[0] <= 0 && q.ci95[1] >= 0;
  return {
    arm,
    des: summarizeRequests(d),
    live: summarizeRequests(l),
    desN: d.length,
    liveN: l.length,
    ttft: { median: median!, p95: p95! },
    agree: covers(median!) && covers(p95!),
  };
}
