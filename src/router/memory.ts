// RouterMemory: what a router keeps between requests (reservations, correction, health, sends).
import type { PodState } from '../core/types.js';
import type { PluginConfig } from '../config/plugin-config.js';
import type { IndexReader, ReservationStore } from '../index/index.js';
import { ContextWindows } from './context-windows.js';
import { TtftCorrection } from './correction.js';
import { ItlAdmission } from './itl-admission.js';
import { ClassActivity, FairQueue, VirtualCounters } from '../policies/index.js';
import { ReservationBook } from './reservations.js';
import { SendMemory } from './send-memory.js';
import { SharedReservations } from './shared-reservations.js';
import { IndexDeadline } from './steps/lookup.js';
import { UpstreamFailures } from './upstream-failures.js';

/**
 * What a router keeps between requests, which its steps read and its log-phase feedback (`observe`) updates.
 * Each step takes the part it uses (a `Pick` of this), so its signature says what it depends on.
 */
export interface RouterMemory {
  readonly config: PluginConfig;
  /** The index, looked up under the router's deadline. */
  readonly index: IndexDeadline;
  /** Work sent to each pod that its metrics cannot show yet. */
  readonly reservations: ReservationBook;
  /** The other Kong nodes' reservations (share_reservations), null when not shared. */
  readonly shared: SharedReservations | null;
  /** Prompts sent to each pod, recalled after a partial rebuild of its index (kv_reuse_reports_ms). */
  readonly sends: SendMemory;
  readonly correction: TtftCorrection;
  /** The ITL guard (itl_slo_ms), null when off. */
  readonly itl: ItlAdmission | null;
  /** Pods kept out after an upstream failure (passive health). */
  readonly failures: UpstreamFailures;
  /** Last pods seen per model, so an index outage can still spread load (fail open, not fail blind). */
  readonly lastKnownPods: Map<string, PodState[]>;
  /** Each model's context window: max_model_len from the config, else from its pods' last lookup. */
  readonly windows: ContextWindows;
  /** Service classes (policies only, else null): who was served where, tenants' work, who waits. */
  readonly classes: ClassState | null;
}

/** What class admission and fairness keep per router (per node, per config; docs/policies.md). */
export interface ClassState {
  activity: ClassActivity;
  counters: VirtualCounters;
  queue: FairQueue;
}

function classState(): ClassState {
  const counters = new VirtualCounters();
  return { activity: new ClassActivity(), counters, queue: new FairQueue(counters) };
}

export function createRouterMemory(
  config: PluginConfig,
  index: IndexReader & ReservationStore,
): RouterMemory {
  return {
    config,
    index: new IndexDeadline(index, config.redis_timeout_ms),
    reservations: new ReservationBook(config.reservation_ttl_ms),
    shared:
      config.share_reservations && config.reservation_ttl_ms > 0
        ? new SharedReservations(index, config.reservation_ttl_ms)
        : null,
    sends: new SendMemory(),
    correction: new TtftCorrection(),
    itl: config.itl_slo_ms > 0 ? new ItlAdmission(config) : null,
    failures: new UpstreamFailures(),
    lastKnownPods: new Map(),
    windows: new ContextWindows(config.max_model_len),
    classes: config.policies ? classState() : null,
  };
}
