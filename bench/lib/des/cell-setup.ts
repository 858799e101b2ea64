// Builds one discrete-event cell's pods, index and arm (the same engine seeds for every arm of a trial).
import type { PluginConfig } from '../../../src/config/plugin-config.js';
import { MemoryKvIndex } from '../../../src/index/index.js';
import { SEGMENT_CACHE_BYTES } from '../../../src/router/resources.js';
import { createPromptTokenizer } from '../../../src/tokenize/prompt-tokenizer.js';
import { approxPrefixArm } from '../arms/approx-prefix.js';
import { consistentHashArm } from '../arms/consistent-hash.js';
import { latencyEwmaArm } from '../arms/latency-ewma.js';
import { kubeProxyArm } from '../arms/kube-proxy.js';
import { leastConnectionsArm, randomArm, roundRobinArm } from '../arms/simple.js';
import type { Arm } from '../arms/types.js';
import { Rng } from '../rng.js';
import type { Slo } from '../stats/goodput.js';
import { routerConfig, type ModelSetup } from '../setup.js';
import type { ArmName, Profile, RandomRouting, WorkloadName } from '../types.js';
import { WorkloadFactory, type WorkloadShapes } from '../workload/workloads.js';
import { CollectorFeed } from './feed.js';
import { kinferenceArm } from './kinference-arm.js';
import { oracleArm } from './oracle-arm.js';
import { SimPod, type PodSpec } from './pod.js';
import { runCell, type CellInput, type CellResult, type PathLatency } from './run-cell.js';

export interface FleetSpec {
  pods: number;
  pod: PodSpec;
  latency: PathLatency;
}

/** Fresh pods for one cell; the same engine seeds for every arm of a trial, so arms differ only in routing. */
export function simPods(fleet: FleetSpec, seed: number, trial: number): SimPod[] {
  return Array.from(
    { length: fleet.pods },
    (_, i) =>
      new SimPod(
        `pod-${i}`,
        `10.0.0.${10 + i}:8000`,
        fleet.pod,
        (Rng.derive(seed, trial, 'pod', i).nextU32() >>> 1) + 1,
      ),
  );
}

/** What every cell takes from the model setup and the fleet: tokenizing the client's turns, the path latency. */
export function cellEnvironment(
  m: ModelSetup,
  fleet: FleetSpec,
): Pick<CellInput, 'model' | 'template' | 'promptTokenizer' | 'wordOf' | 'latency'> {
  return {
    model: m.model,
    template: m.template,
    promptTokenizer: m.promptTokenizer,
    wordOf: m.wordOf,
    latency: fleet.latency,
  };
}

/** Builds fresh pods, index and arm for one cell (nothing is shared between cells but the tokenizer). */
export async function runArmCell(opts: {
  arm: ArmName;
  workload: WorkloadName;
  shapes: WorkloadShapes;
  profile: Profile;
  fleet: FleetSpec;
  model: ModelSetup;
  seed: number;
  trial: number;
  /** The kinference arms' router config (default: the benchmark's, `routerConfig`). */
  config?: PluginConfig;
  /** The workload's SLO: kinference-slo sets its admission control (itl_slo_ms, shed_ttft_slo_ms) to it. */
  slo?: Slo;
  /** How the random arm (kube-proxy) picks: per request (default) or per keep-alive connection. */
  randomRouting?: RandomRouting;
  /** The kinference arms' pods are calibrated from /metrics by the collector's estimator (as live). */
  collectorCalibration?: boolean;
  /**
   * The kinference arms' collector restarts at this virtual second, rebuilding each pod from its last
   * `replayBatches` KV-event batches (vLLM's buffer_steps, default 10,000).
   */
  collectorRestart?: { atS: number; replayBatches?: number };
  /** Kong nodes in front of the kinference arms, each with its own router (default 1). */
  gateways?: number;
  onProgress?: (virtualMs: number) => void;
}): Promise<CellResult & { fallbacks?: Record<string, number>; indexStats?: Record<string, number> }> {
  const { fleet, model, seed, trial } = opts;
  const pods = simPods(fleet, seed, trial);
  let now = 0;
  const clock = (): number => now;
  const armRng = Rng.derive(seed, trial, 'arm', opts.arm);
  let feed: CollectorFeed | null = null;
  let arm: Arm;
  let fallbacks: Map<string, number> | undefined;
  switch (opts.arm) {
    case 'random':
      arm = opts.randomRouting === 'per-connection' ? kubeProxyArm(armRng) : randomArm(armRng);
      break;
    case 'round-robin':
      arm = roundRobinArm();
      break;
    case 'least-connections':
      arm = leastConnectionsArm();
      break;
    case 'latency':
      arm = latencyEwmaArm();
      break;
    case 'consistent-hash':
      arm = consistentHashArm(pods.map((p) => p.id));
      break;
    case 'approx-prefix':
      arm = approxPrefixArm({
        model: model.model,
        blockTokens: 64,
        capacityBlocks: Math.floor(fleet.pod.kvCapacityTokens / 64),
      });
      break;
    case 'kinference':
    case 'kinference-slo': {
      const index = new MemoryKvIndex();
      feed = new CollectorFeed(
        index,
        model.model,
        fleet.pod.blockSize,
        opts.collectorCalibration ?? false,
        opts.collectorRestart ? (opts.collectorRestart.replayBatches ?? 10_000) : null,
      );
      let config = opts.config ?? routerConfig(model);
      if (opts.arm === 'kinference-slo') {
        if (!opts.slo) throw new Error('kinference-slo needs the workload SLO');
        config = { ...config, itl_slo_ms: opts.slo.itlMs, shed_ttft_slo_ms: opts.slo.ttftMs };
      }
      // Where the path charges the plugin's own tokenizing, the arm has the plugin's own segment cache
      // (the client's tokenizer has already seen every prompt).
      const tokenizer = fleet.latency.requestOverheadMsPerTokenizedToken
        ? createPromptTokenizer(model.promptTokenizer.tokenizer, { maxBytes: SEGMENT_CACHE_BYTES })
        : model.promptTokenizer;
      const k = kinferenceArm(config, index, model.template, tokenizer, clock, opts.arm, opts.gateways);
      fallbacks = k.fallbacks;
      arm = k;
      break;
    }
    case 'oracle':
      arm = oracleArm(() => pods, fleet.latency.requestOverheadMs + fleet.latency.responseOverheadMs);
      break;
  }
  const factory = new WorkloadFactory(opts.workload, opts.shapes, model.synth, seed, trial);
  const result = await runCell({
    arm,
    factory,
    profile: opts.profile,
    pods,
    ...cellEnvironment(model, fleet),
    seed,
    trial,
    feed,
    trackBlockHashes: opts.arm === 'oracle',
    ...(opts.collectorRestart ? { collectorRestartAtMs: opts.collectorRestart.atS * 1000 } : {}),
    onProgress: (t) => {
      now = t;
      opts.onProgress?.(t);
    },
  });
  if (!fallbacks || !feed) return result;
  const indexStats = {
    indexedBlocks: feed.counters.indexedBlocks,
    unindexedBlocks: feed.counters.unindexedBlocks,
    decodeErrors: feed.decodeErrors,
  };
  return { ...result, fallbacks: Object.fromEntries(fallbacks), indexStats };
}
