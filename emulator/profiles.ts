// Hardware/model presets of the emulated engine (L40S, H100 with a ~27B FP8 model), by name.
import type { EngineOptions } from './engine/engine.js';
import type { StepCostModel } from './engine/step-time.js';

/**
 * Hardware/model presets for the emulated engine. Numbers are derived in docs/emulator.md (roofline
 * with BLIS-calibrated MFU); spec/01-unit/emulator/calibration.spec.ts checks each preset's cold 16k
 * prefill and ITL against `expect` in virtual time.
 */
export interface EngineProfile extends StepCostModel {
  name: string;
  description: string;
  /** KV cache size in tokens (num_gpu_blocks × block_size). */
  kvCapacityTokens: number;
  /** Token budget per step (max_num_batched_tokens). */
  maxNumBatchedTokens: number;
  /** Running-batch cap (max_num_seqs). */
  maxNumSeqs: number;
  /** Longest prompt + output a request may have (capped to the KV capacity). */
  maxModelLen: number;
  /** Mean output length when EOS is sampled (requests without ignore_eos). */
  meanOutputTokens: number;
  /** Documented targets the calibration test checks (ms). */
  expect: { cold16kTtftMs: [number, number]; itlMs: [number, number] };
}

/**
 * ~27B dense FP8 model on one L40S (48 GB): a = 2P/(733 TFLOPS·0.32) ≈ 0.23 ms/token,
 * b ≈ 1.8e-8 s/token² (BF16 attention, 64 layers × 8192), weights 27 GB / (0.8·864 GB/s) ≈ 39 ms,
 * KV ≈ 256 KiB/token read at the same bandwidth ≈ 0.36 µs/token. KV budget 35,328 tokens (bench.md §3.6);
 * vLLM's batch defaults for a < 70 GiB GPU: 2048 tokens, 256 sequences.
 * Cold 16k prefill ≈ 6.2 s (8 chunks of 2048); ITL 43 ms (short context) to 56 ms (cache full).
 */
export const L40S_27B_FP8: EngineProfile = {
  name: 'l40s-27b-fp8',
  description: '27B dense FP8 model on one NVIDIA L40S 48 GB (the published benchmark setup)',
  kvCapacityTokens: 35_328,
  maxNumBatchedTokens: 2048,
  maxNumSeqs: 256,
  maxModelLen: 32_768,
  meanOutputTokens: 256,
  stepOverheadMs: 4,
  perSeqOverheadMs: 0.0044,
  prefillMsPerToken: 0.23,
  attentionMsPerToken2: 1.8e-5,
  weightReadMs: 39,
  kvReadMsPerToken: 0.36e-3,
  expect: { cold16kTtftMs: [6000, 7000], itlMs: [43, 56] },
};

/**
 * Same model on one H100 SXM 80 GB: MFU 0.45 prefill (÷3.8 vs L40S), 3.35 TB/s (÷4 decode).
 * KV: 0.9 × 80 GB − 27 GB weights − ~4 GB activations ≈ 41 GB / 256 KiB ≈ 160k tokens → 163,840.
 * vLLM's batch defaults for a ≥ 70 GiB non-A100 GPU: 8192 tokens, 1024 sequences.
 */
export const H100_27B_FP8: EngineProfile = {
  name: 'h100-27b-fp8',
  description: '27B dense FP8 model on one NVIDIA H100 SXM 80 GB',
  kvCapacityTokens: 163_840,
  maxNumBatchedTokens: 8192,
  maxNumSeqs: 1024,
  maxModelLen: 40_960,
  meanOutputTokens: 256,
  stepOverheadMs: 3,
  perSeqOverheadMs: 0.0044,
  prefillMsPerToken: 0.061,
  attentionMsPerToken2: 4.7e-6,
  weightReadMs: 10,
  kvReadMsPerToken: 0.1e-3,
  expect: { cold16kTtftMs: [1400, 1900], itlMs: [13, 18] },
};

export const PROFILES: Readonly<Record<string, EngineProfile>> = {
  [L40S_27B_FP8.name]: L40S_27B_FP8,
  [H100_27B_FP8.name]: H100_27B_FP8,
};

export function getProfile(name: string): EngineProfile | undefined {
  return PROFILES[name];
}

export interface EngineOverrides {
  blockSize?: number;
  kvCapacityTokens?: number;
  maxNumBatchedTokens?: number;
  maxNumSeqs?: number;
  maxModelLen?: number;
  meanOutputTokens?: number;
  seed?: number;
  hashSeed?: string;
  noneHash?: Uint8Array;
  eosTokenId?: number;
  outputVocab?: readonly number[];
  reserveFullIsl?: boolean;
  longPrefillTokenThreshold?: number;
}

/** Engine options for a profile, with any field overridden (block size 16 and seed 1 by default). */
export function engineOptionsFor(profile: EngineProfile, o: EngineOverrides = {}): EngineOptions {
  const opts: EngineOptions = {
    cost: profile,
    kvCapacityTokens: o.kvCapacityTokens ?? profile.kvCapacityTokens,
    blockSize: o.blockSize ?? 16,
    maxNumBatchedTokens: o.maxNumBatchedTokens ?? profile.maxNumBatchedTokens,
    maxNumSeqs: o.maxNumSeqs ?? profile.maxNumSeqs,
    maxModelLen: o.maxModelLen ?? profile.maxModelLen,
    meanOutputTokens: o.meanOutputTokens ?? profile.meanOutputTokens,
    seed: o.seed ?? 1,
    eosTokenId: o.eosTokenId ?? 0,
  };
  if (o.hashSeed !== undefined) opts.hashSeed = o.hashSeed;
  if (o.noneHash !== undefined) opts.noneHash = o.noneHash;
  if (o.outputVocab !== undefined) opts.outputVocab = o.outputVocab;
  if (o.reserveFullIsl !== undefined) opts.reserveFullIsl = o.reserveFullIsl;
  if (o.longPrefillTokenThreshold !== undefined) opts.longPrefillTokenThreshold = o.longPrefillTokenThreshold;
  return opts;
}
