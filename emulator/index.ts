/**
 * The vLLM emulator as a library. The engine (virtual time, no I/O) is what the discrete-event benchmark
 * drives; the server parts serve it live. See docs/emulator.md.
 */
export { Engine, type EngineOptions, type EngineSnapshot } from './engine/engine.js';
export type {
  AddRequestResult,
  AdmittedRequest,
  AllBlocksClearedEvent,
  BlockRemovedEvent,
  BlockStoredEvent,
  ControlOutcome,
  EngineBlockHash,
  EngineOutcome,
  EngineRequestInput,
  ExtraKeys,
  FinishReason,
  FinishedRequest,
  KvCacheEvent,
  ScheduledWork,
  StepOutcome,
  TokenOutput,
} from './engine/types.js';
export { stepCost, type StepCost, type StepCostModel } from './engine/step-time.js';
export {
  blockHashToBytes,
  blockHashToU64,
  hashBlockTokens,
  noneHashFromSeed,
  randomNoneHash,
  RequestBlockHasher,
} from './engine/block-hash.js';
export { Rng } from './engine/rng.js';
export {
  engineOptionsFor,
  getProfile,
  H100_27B_FP8,
  L40S_27B_FP8,
  PROFILES,
  type EngineOverrides,
  type EngineProfile,
} from './profiles.js';
export { encodeKvEventBatch, type KvEventBatchOptions, type KvEventsFormat } from './wire/kv-event-batch.js';
export { END_SEQ, parseSeqFrame, seqFrame } from './wire/zmq-frames.js';
export { startEmulatorFleet, type EmulatorFleet, type EmulatorFleetOptions } from './server/fleet.js';
export { EmulatedPod } from './server/pod-server.js';
