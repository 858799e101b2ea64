// The class-admission step (policies only): a pod that would not cost a higher class its objective, or wait.
import type { Prediction } from '../../core/predictor.js';
import { placeByClass, sheddable, type Blocked, type PodFacts, type Tenant } from '../../policies/index.js';
import type { RouterMemory } from '../memory.js';
import type { OtherReservation } from '../shared-reservations.js';
import type { ClassAdmission, RouteOutcome } from '../outcome.js';
import type { Choice } from './choose.js';

/** What the request's prefill adds in front of a request already queued on the pod, ms. */
function addedMs(p: Prediction): number {
  return (p.prefillMs + p.loadMs) * p.ttftFactor;
}

/** What a request arriving just after this one would wait on the pod, ms. */
function waitBehindMs(p: Prediction): number {
  return Math.max(0, p.modelTtftMs - p.overheadMs) * p.ttftFactor;
}

/** The facts class admission judges a pod by: the higher-class requests there, pending or expected. */
export function podFacts(
  memory: Pick<RouterMemory, 'reservations' | 'classes'>,
  p: Prediction,
  nowMs: number,
  /** No pod is healthy (the collector lost its scrapes): every pod is ranked anyway, so every pod counts. */
  noneHealthy = false,
  /** The other Kong nodes' reservations on this pod (share_reservations), with their classes. */
  others: readonly OtherReservation[] = [],
): PodFacts {
  const pending = [];
  for (const r of memory.reservations.active(p.podId, nowMs)) {
    const c = memory.reservations.classOf(r);
    // Past its expected first token it is decoding: a prefill placed now no longer delays its TTFT.
    if (c && nowMs - r.atMs < c.expectedTtftMs) pending.push(c);
  }
  for (const r of others) {
    const c = r.cls;
    if (!c) continue;
    if (nowMs - r.atMs < c.expectedTtftMs) pending.push(c);
    // Served there by another node: this node protects the class's next request on the pod too.
    memory.classes?.activity.record(p.podId, c, r.atMs);
  }
  return {
    podId: p.podId,
    eligible: (p.healthy || noneHealthy) && p.withinItl,
    addedMs: addedMs(p),
    waitBehindMs: waitBehindMs(p),
    pending,
    protectedClasses: memory.classes?.activity.recent(p.podId, nowMs) ?? [],
    ownTtftMs: p.predictedTtftMs,
  };
}

/**
 * The other nodes' reservations of a class predicted past its objective, or marked squeezed by what their node
 * measured, squeeze the class here too: before any pod's facts, since a squeeze protects every pod.
 */
function squeezesOfOthers(
  memory: Pick<RouterMemory, 'classes'>,
  others: ReadonlyMap<string, readonly OtherReservation[]> | null | undefined,
): void {
  if (!others || !memory.classes) return;
  const activity = memory.classes.activity;
  for (const list of others.values())
    for (const { cls: c, atMs } of list) {
      if (!c) continue;
      if (c.squeezed) activity.squeeze(c, atMs, false);
      else activity.judge(c, c.expectedTtftMs, atMs, false);
    }
}

export interface AdmitInput {
  choice: Choice;
  tenant: Tenant;
  nowMs: number;
  /** Until when the request may wait for capacity (its class's max_wait_ms); null: the caller cannot wait. */
  waitUntilMs: number | null;
  /** How long it has waited already, ms (for the 429's message). */
  waitedMs: number;
  /** The other Kong nodes' reservations by pod (share_reservations; null: not shared or not read). */
  others?: ReadonlyMap<string, readonly OtherReservation[]> | null;
}

export interface Admitted {
  choice: Choice;
  admission: ClassAdmission;
  shed: RouteOutcome['shed'];
}

function describe(b: Blocked): string {
  if (b.who === 'own')
    return `${b.podId} would answer it ${Math.round(b.overMs)} ms past its own ${b.objectiveMs} ms objective`;
  const who = b.who === 'pending' ? 'a request in flight' : 'the next request';
  return `${b.podId} would push ${who} of priority ${b.priority} ${Math.round(b.overMs)} ms past its ${b.objectiveMs} ms objective`;
}

/**
 * The class-admission step, after choose: the best pod where no higher class is pushed past its TTFT
 * objective (policies/class-admission.ts). When there is none: wait if allowed (the caller re-decides in
 * fairness order), else a sheddable class is shed (429) and any other is served on its best pod anyway.
 * Unlike the shed step it also judges a stale-index decision: what protects a class is this router's own
 * reservations and class activity, which the index's staleness does not touch.
 */
export function admitClass(
  memory: Pick<RouterMemory, 'reservations' | 'classes' | 'config'>,
  input: AdmitInput,
): Admitted {
  const { choice, tenant, nowMs } = input;
  const cls = tenant.serviceClass;
  const base = { className: cls.name, priority: cls.priority };
  // A stale index or a truncated prompt still has predictions (the router's own reservations are exact);
  // a request routed without any (steps/fallback.ts) never comes here.
  if (choice.decision.chosen === null)
    return { choice, shed: null, admission: { ...base, action: 'best', detail: null, waitUntilMs: null } };
  const ranked = choice.decision.candidates;
  const noneHealthy = choice.fallbackReason === 'all_pods_unhealthy';
  squeezesOfOthers(memory, input.others);
  const facts = ranked.map((p) => podFacts(memory, p, nowMs, noneHealthy, input.others?.get(p.podId) ?? []));
  // Reserved pods protect their classes from the start (policies/class-placement.ts).
  const verdict = placeByClass(
    cls.priority,
    memory.config.policies?.classes ?? [],
    facts,
    cls.ttft_objective_ms,
  );
  if (verdict.kind === 'best')
    return { choice, shed: null, admission: { ...base, action: 'best', detail: null, waitUntilMs: null } };
  const detail = verdict.blocked.map(describe).join('; ');
  if (verdict.kind === 'moved') {
    const chosen = ranked[verdict.podIndex]!;
    chosen.reasons.push(`class ${cls.name}: placed here, not on a pod where ${detail}`);
    return {
      choice: { ...choice, decision: { ...choice.decision, chosen } },
      shed: null,
      admission: { ...base, action: 'moved', detail, waitUntilMs: null },
    };
  }
  if (input.waitUntilMs !== null && nowMs < input.waitUntilMs)
    return {
      choice,
      shed: null,
      admission: { ...base, action: 'wait', detail, waitUntilMs: input.waitUntilMs },
    };
  if (sheddable(cls.priority))
    return {
      choice,
      shed: {
        status: 429,
        retryAfterS: Math.max(1, Math.ceil(verdict.retryAfterMs / 1000)),
        byClass: { waitedMs: input.waitedMs },
      },
      admission: { ...base, action: 'shed', detail, waitUntilMs: null },
    };
  choice.decision.chosen.reasons.push(`class ${cls.name}: served on its best pod though ${detail}`);
  return { choice, shed: null, admission: { ...base, action: 'over_objective', detail, waitUntilMs: null } };
}
