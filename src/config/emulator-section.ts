// The fleet YAML's `emulator:` section: its TypeBox schema, owned by the emulator.
import { Type, type Static } from '@sinclair/typebox';

/** `emulator:` section of the fleet YAML. Owned by the emulator (docs/emulator.md). */
export const EmulatorSectionSchema = Type.Object(
  {
    profile: Type.String({
      default: 'l40s-27b-fp8',
      description: 'Hardware/model preset: l40s-27b-fp8 (the published setup) or h100-27b-fp8.',
    }),
    time_scale: Type.Number({
      default: 1,
      exclusiveMinimum: 0,
      description:
        'Engine speed-up: 10 runs every step 10× faster than the profile (all exposed times shrink too).',
    }),
    kv_capacity_tokens: Type.Optional(
      Type.Integer({
        minimum: 16,
        description: 'KV cache size in tokens (num_gpu_blocks × block_size); the profile default otherwise.',
      }),
    ),
    kv_events_format: Type.Union([Type.Literal('map'), Type.Literal('array')], {
      default: 'map',
      description: 'KV event encoding: map (vLLM ≥ 0.24) or array (legacy array_like).',
    }),
    kv_events_hash: Type.Union([Type.Literal('int'), Type.Literal('bytes')], {
      default: 'int',
      description:
        'Block hashes on the wire: int (uint64, VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1) or bytes (raw digest).',
    }),
    kv_events_buffer_steps: Type.Integer({
      default: 10000,
      minimum: 0,
      maximum: 10000000,
      description: 'Batches kept for the replay socket (vLLM buffer_steps).',
    }),
    seed: Type.Integer({
      default: 1,
      description: 'Seeds output sampling; each pod and DP rank derives its own stream.',
    }),
    hash_seed: Type.Optional(
      Type.String({
        description:
          "vLLM's PYTHONHASHSEED: when set, every pod's NONE_HASH (and so its block hashes) is the same; unset = random per pod start.",
      }),
    ),
    max_num_batched_tokens: Type.Optional(
      Type.Integer({ minimum: 1, description: 'Token budget per step; profile default otherwise.' }),
    ),
    max_num_seqs: Type.Optional(
      Type.Integer({ minimum: 1, description: 'Running-batch cap; profile default otherwise.' }),
    ),
    long_prefill_token_threshold: Type.Integer({
      default: 0,
      minimum: 0,
      description:
        "vLLM's --long-prefill-token-threshold: no request gets more than this many tokens in one step, so a long prefill leaves room for others (a cache hit then need not wait for it). 0: no cap (vLLM's default).",
    }),
    max_model_len: Type.Optional(
      Type.Integer({ minimum: 16, description: 'Longest prompt + output; profile default otherwise.' }),
    ),
    mean_output_tokens: Type.Optional(
      Type.Integer({
        minimum: 1,
        description: 'Mean output length when EOS is sampled (requests without ignore_eos).',
      }),
    ),
    prompt_tokens_details: Type.Boolean({
      default: true,
      description: 'Report usage.prompt_tokens_details.cached_tokens (vLLM --enable-prompt-tokens-details).',
    }),
  },
  { additionalProperties: false },
);

export type EmulatorSection = Static<typeof EmulatorSectionSchema>;
