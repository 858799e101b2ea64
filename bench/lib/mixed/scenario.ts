// The mixed-tenant scenario: three tenants, their policies, and the arms that route them in virtual time.
import type { PluginConfig } from '../../../src/config/plugin-config.js';
import { MemoryKvIndex } from '../../../src/index/index.js';
import { MemoryLimitStore, TokenLimiter } from '../../../src/limits/index.js';
import type { CallerFacts } from '../../../src/policies/index.js';
import { randomArm } from '../arms/simple.js';
import { requestLimitArm } from '../arms/request-limit.js';
import type { Arm } from '../arms/types.js';
import { cellEnvironment, simPods, type FleetSpec } from '../des/cell-setup.js';
import { CollectorFeed } from '../des/feed.js';
import { kinferenceArm } from '../des/kinference-arm.js';
import { runMixed, type MixedResult, type TenantSource } from '../des/run-mixed.js';
import { Rng } from '../rng.js';
import { routerConfig, type ModelSetup } from '../setup.js';
import type { Profile } from '../types.js';
import { PUBLISHED_SHAPES, WorkloadFactory, type WorkloadShapes } from '../workload/workloads.js';

/** The three tenants, as Kong consumers. */
export const CHAT = 'chat';
export const NIGHTLY = 'nightly';
export const FREE = 'free';

export type MixedArmName =
  'random' | 'kinference' | 'kinference+policies' | 'random+kong-rate-limit' | 'kinference+kong-rate-limit';
export const MIXED_ARMS: MixedArmName[] = [
  'random',
  'kinference',
  'kinference+policies',
  'random+kong-rate-limit',
  'kinference+kong-rate-limit',
];

export interface MixedScenario {
  windows: { warmupS: number; measureS: number; cooldownS: number };
  /** The interactive tenant: multiturn chat, Poisson conversations' turns per second. */
  chatRatePerS: number;
  /** Its TTFT objective (the interactive class's ttft_objective_ms), ms: the multiturn SLO. */
  chatObjectiveMs: number;
  itlMs: number;
  /** The batch tenant's objective (batch class), ms; its goodput counts requests within it. */
  batchObjectiveMs: number;
  /**
   * How long a batch request may wait in the gateway for capacity (the batch class's max_wait_ms) before it
   * is shed: what keeps the fleet busy with batch work between the chat's turns instead of refusing it.
   */
  batchMaxWaitMs: number;
  /**
   * Closed-loop streams that measure the fleet's solo capacity for the batch workload: the best goodput
   * (requests within the batch objective per minute) over these concurrencies.
   */
  batchCapacityStreams: number[];
  /** The flood: this many times the measured solo capacity, open loop. */
  batchFloodFactor: number;
  /** The limited tenant: single-turn prompts of this size, offered at `freeOfferFactor` × its limit. */
  free: { promptTokens: number; outputTokens: number; limitPerMin: number; offerFactor: number };
  /** The interactive class's reserved_pods: pods kept ready for it from the start (class-placement.ts). */
  interactiveReservedPods: number;
  /** Kong nodes in front of the kinference arms (each its own router; one limiter store, as one Redis). */
  gateways: number;
  seed: number;
}

export const MIXED_SCENARIO: MixedScenario = {
  windows: { warmupS: 60, measureS: 120, cooldownS: 10 },
  chatRatePerS: 0.3,
  chatObjectiveMs: 0,
  itlMs: 100,
  batchObjectiveMs: 30_000,
  batchMaxWaitMs: 20_000,
  batchCapacityStreams: [4, 8, 16],
  batchFloodFactor: 2,
  free: { promptTokens: 500, outputTokens: 32, limitPerMin: 30_000, offerFactor: 2 },
  interactiveReservedPods: 1,
  gateways: 1,
  seed: 42,
};

/** The tenants' policies as an operator writes them (docs/policies.md "Measured: a mixed-tenant fleet"). */
export function mixedPolicies(s: MixedScenario): Record<string, unknown> {
  return {
    tenant_from: ['consumer'],
    default_class: 'standard',
    classes: [
      {
        name: 'interactive',
        priority: 100,
        ttft_objective_ms: Math.round(s.chatObjectiveMs),
        reserved_pods: s.interactiveReservedPods,
      },
      { name: 'standard', priority: 0, ttft_objective_ms: 10_000 },
      {
        name: 'batch',
        priority: -1,
        ttft_objective_ms: s.batchObjectiveMs,
        max_wait_ms: s.batchMaxWaitMs,
      },
    ],
    tenants: [
      { match: { consumer: CHAT }, class: 'interactive' },
      { match: { consumer: NIGHTLY }, class: 'batch' },
      { match: { consumer: FREE }, class: 'standard' },
    ],
    rate_limits: [
      {
        match: { consumer: FREE },
        limits: [{ tokens: 'prompt', window: 'minute', limit: s.free.limitPerMin }],
      },
    ],
  };
}

function caller(name: string): CallerFacts {
  return { consumer: { id: `id-${name}`, username: name }, consumerGroups: [], headerTenant: null };
}

export interface TenantLoad {
  /** Requests per second of each open-loop tenant, or streams of a closed-loop one. */
  chat: number | null;
  nightly: { ratePerS: number } | { streams: number } | null;
  free: number | null;
}

/** The tenant sources of one run (null load: the tenant is absent), each with its own salted prompts. */
export function tenantSources(s: MixedScenario, m: ModelSetup, load: TenantLoad, trial = 0): TenantSource[] {
  const shapes: WorkloadShapes = {
    ...PUBLISHED_SHAPES,
    control: { promptTokens: s.free.promptTokens, outputTokens: s.free.outputTokens },
  };
  const open = (rate: number): Profile => ({ kind: 'poisson', rate, ...s.windows, arrivals: 'poisson' });
  const out: TenantSource[] = [];
  if (load.chat !== null)
    out.push({
      name: CHAT,
      factory: new WorkloadFactory('multiturn', shapes, m.synth, s.seed, trial, CHAT),
      profile: open(load.chat),
      caller: caller(CHAT),
    });
  if (load.nightly !== null)
    out.push({
      name: NIGHTLY,
      factory: new WorkloadFactory('shared-prefix', shapes, m.synth, s.seed, trial, NIGHTLY),
      profile:
        'streams' in load.nightly
          ? { kind: 'concurrent', streams: load.nightly.streams, ...s.windows }
          : open(load.nightly.ratePerS),
      caller: caller(NIGHTLY),
    });
  if (load.free !== null)
    out.push({
      name: FREE,
      factory: new WorkloadFactory('control', shapes, m.synth, s.seed, trial, FREE),
      profile: open(load.free),
      caller: caller(FREE),
    });
  return out;
}

/** Kong's per-consumer request limits (requests per minute) of the rate-limit arms. */
export type RequestLimits = Record<string, number>;

/** Runs one arm over the tenants in virtual time, on fresh pods and a fresh index. */
export async function runMixedArm(opts: {
  arm: MixedArmName;
  scenario: MixedScenario;
  tenants: TenantSource[];
  fleet: FleetSpec;
  model: ModelSetup;
  requestLimits?: RequestLimits;
  trial?: number;
  onProgress?: (virtualMs: number) => void;
}): Promise<MixedResult> {
  const { scenario: s, fleet, model } = opts;
  const trial = opts.trial ?? 0;
  const pods = simPods(fleet, s.seed, trial);
  let now = 0;
  const clock = (): number => now;
  let feed: CollectorFeed | null = null;
  let arm: Arm;
  if (opts.arm.startsWith('random')) arm = randomArm(Rng.derive(s.seed, trial, 'arm', 'random'));
  else {
    const index = new MemoryKvIndex();
    feed = new CollectorFeed(index, model.model, fleet.pod.blockSize, false, null);
    const policies = opts.arm === 'kinference+policies';
    const config: PluginConfig = routerConfig(model, policies ? { policies: mixedPolicies(s) } : {});
    const limiter =
      policies && config.policies
        ? new TokenLimiter({
            policies: config.policies,
            store: new MemoryLimitStore(),
            keyPrefix: config.redis_key_prefix,
            timeoutMs: 1000,
            clock,
          })
        : null;
    arm = kinferenceArm(
      config,
      index,
      model.template,
      model.promptTokenizer,
      clock,
      'kinference',
      s.gateways,
      limiter,
    );
  }
  if (opts.arm.endsWith('kong-rate-limit')) arm = requestLimitArm(arm, opts.requestLimits ?? {});
  return runMixed({
    arm,
    tenants: opts.tenants,
    windows: s.windows,
    pods,
    ...cellEnvironment(model, fleet),
    seed: s.seed,
    trial,
    feed,
    onProgress: (t) => {
      now = t;
      opts.onProgress?.(t);
    },
  });
}
