// Open-loop arrivals: Poisson slots, and GuideLLM's own poisson strategy as it runs.
import MersenneTwister from 'mersenne-twister';
import { Rng } from '../rng.js';
import type { ArrivalProcess } from '../types.js';

/** One open-loop arrival: when the request is sent, and by which client worker. */
export interface ArrivalSlot {
  atMs: number;
  /** The worker sends the follow-up turns of the conversations it started (GuideLLM's turns_queue). */
  worker: number;
}

/** Python's `random.Random(seed).expovariate(rate)` stream: MT19937 seeded by `init_by_array`, 53-bit floats. */
export function pythonExpovariate(seed: number, ratePerS: number): () => number {
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff)
    throw new RangeError(`GuideLLM random_seed ${seed}: an integer in 0..2^32-1`);
  const mt = new MersenneTwister();
  mt.init_by_array([seed], 1);
  return () => -Math.log(1 - mt.random_long()) / ratePerS;
}

/** A Poisson process (gaps from the benchmark's seeded stream), its slots dealt to `workers` in turn. */
export function poissonSlots(ratePerS: number, durationMs: number, rng: Rng, workers = 1): ArrivalSlot[] {
  const out: ArrivalSlot[] = [];
  for (let t = rng.exponential(ratePerS / 1000); t <= durationMs; t += rng.exponential(ratePerS / 1000))
    out.push({ atMs: t, worker: out.length % workers });
  return out;
}

/**
 * The arrivals of GuideLLM's `poisson` strategy as it runs (v0.4–v0.7: `AsyncPoissonStrategy` in
 * `scheduler/strategies.py`, the loop in `scheduler/worker.py`, `max_worker_processes` = 10 and
 * `fut_scheduling_time_limit` = 0 in `scheduler/worker_group.py`). Every worker process draws its gaps
 * from its own `random.Random(random_seed)`, all seeded alike, and adds them to one shared offset; a worker
 * draws, sleeps until that time, sends (picking its turn then) and draws again. So the workers take turns
 * and each gap recurs once per worker: the schedule is rounds of `workers` requests at one gap each, and a
 * short gap is a burst. The marginal gap is exponential with the rate; the process is not Poisson.
 */
export function guidellmPoissonSlots(o: {
  ratePerS: number;
  durationMs: number;
  workers: number;
  /** GuideLLM's `random_seed` (default 42). */
  seed: number;
}): ArrivalSlot[] {
  const draws = Array.from({ length: o.workers }, () => pythonExpovariate(o.seed, o.ratePerS));
  // A worker draws again when its slot fires, and slot times only grow, so the workers draw in a fixed
  // rotation; once one draw lands past the run every later one does too.
  const slots: ArrivalSlot[] = [];
  for (let offsetMs = 0, k = 0; ; k++) {
    const worker = k % o.workers;
    offsetMs += draws[worker]!() * 1000;
    if (offsetMs > o.durationMs) return slots;
    slots.push({ atMs: offsetMs, worker });
  }
}

/**
 * The open-loop schedule of a cell. `poisson`: independent exponential gaps from the benchmark's seeded
 * stream, dealt to the client workers in turn (as GuideLLM's workers take turns). `guidellm`: GuideLLM's
 * own schedule, `random_seed` = seed + trial (trial 0 of seed 42 is GuideLLM's default).
 */
export function arrivalSlots(o: {
  ratePerS: number;
  durationMs: number;
  process: ArrivalProcess;
  clientWorkers: number;
  seed: number;
  trial: number;
  workload: string;
}): ArrivalSlot[] {
  if (!Number.isInteger(o.clientWorkers) || o.clientWorkers < 1)
    throw new RangeError(`client workers ${o.clientWorkers}: a whole number ≥ 1`);
  if (o.process === 'guidellm')
    return guidellmPoissonSlots({
      ratePerS: o.ratePerS,
      durationMs: o.durationMs,
      workers: o.clientWorkers,
      seed: o.seed + o.trial,
    });
  const rng = Rng.derive(o.seed, o.trial, 'arrivals', o.workload);
  return poissonSlots(o.ratePerS, o.durationMs, rng, o.clientWorkers);
}
