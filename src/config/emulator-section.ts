import { Type } from '@sinclair/typebox';

/** `emulator:` section of the fleet YAML. Owned by the emulator. */
export const EmulatorSectionSchema = Type.Object({
  profile: Type.String({ default: 'l40s-27b-fp8' }),
  time_scale: Type.Number({ default: 1, exclusiveMinimum: 0 }),
  kv_capacity_tokens: Type.Optional(Type.Integer({ minimum: 16 })),
  kv_events_format: Type.Union([Type.Literal('map'), Type.Literal('array')], { default: 'map' }),
  seed: Type.Integer({ default: 1 }),
});
