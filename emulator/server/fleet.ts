// Starts every selected pod of a fleet file as an emulated vLLM pod at its configured addresses.
import { EmulatorSectionSchema, type EmulatorSection } from '../../src/config/emulator-section.js';
import type { FleetConfig } from '../../src/config/fleet-config.js';
import { defaultTemplateKwargs } from '../../src/config/plugin-config.js';
import { validateConfig } from '../../src/config/validate.js';
import { KinferenceError } from '../../src/core/errors.js';
import { loadChatTemplate, loadTokenizer } from '../../src/tokenize/index.js';
import { getProfile, PROFILES } from '../profiles.js';
import { buildOutputVocab, type OutputVocab } from './output-vocab.js';
import { EmulatedPod } from './pod-server.js';

export interface EmulatorFleetOptions {
  /** Serve only these pod ids (default: every pod in the file). */
  podIds?: string[];
  /** Overrides applied on top of the file's `emulator:` section. */
  overrides?: Partial<EmulatorSection>;
  bindHost?: string;
  log?: (line: string) => void;
}

export interface EmulatorFleet {
  pods: EmulatedPod[];
  settings: EmulatorSection;
  close(): Promise<void>;
}

/**
 * Serves every (selected) pod of a fleet file as an emulated vLLM pod at exactly its `address`,
 * `kv_events` and `kv_events_replay`, with the file's tokenizer and chat template per model.
 */
export async function startEmulatorFleet(
  cfg: FleetConfig,
  opts: EmulatorFleetOptions = {},
): Promise<EmulatorFleet> {
  const settings = validateConfig(
    EmulatorSectionSchema,
    { ...(cfg.emulator ?? {}), ...(opts.overrides ?? {}) },
    'emulator',
  );
  const profile = getProfile(settings.profile);
  if (profile === undefined)
    throw new KinferenceError(
      'KINF_ERR_CONFIG',
      `emulator.profile: unknown profile "${settings.profile}" (known: ${Object.keys(PROFILES).join(', ')})`,
    );
  if (cfg.pods === undefined || cfg.pods.length === 0)
    throw new KinferenceError(
      'KINF_ERR_CONFIG',
      'the emulator serves a static `pods:` list; this file has none',
    );
  const selected = opts.podIds?.length ? cfg.pods.filter((p) => opts.podIds?.includes(p.id)) : cfg.pods;
  const missing = (opts.podIds ?? []).filter((id) => !cfg.pods?.some((p) => p.id === id));
  if (missing.length > 0)
    throw new KinferenceError('KINF_ERR_CONFIG', `pods not in the fleet config: ${missing.join(', ')}`);

  const vocabs = new Map<string, Promise<OutputVocab>>();
  const pods: EmulatedPod[] = [];
  const closeAll = async (): Promise<void> => {
    await Promise.all(pods.map((p) => p.close()));
  };
  try {
    for (const pod of selected) {
      const model = cfg.models[pod.model];
      if (model === undefined)
        throw new KinferenceError('KINF_ERR_CONFIG', `pod ${pod.id}: model ${pod.model} is not listed`);
      const tokenizer = loadTokenizer(model.tokenizer);
      const template = loadChatTemplate(
        model.chat_template,
        defaultTemplateKwargs(model.default_chat_template_kwargs),
      );
      let vocab = vocabs.get(model.tokenizer);
      if (vocab === undefined) vocabs.set(model.tokenizer, (vocab = buildOutputVocab(tokenizer)));
      const p = new EmulatedPod({
        pod,
        model,
        emulator: settings,
        profile,
        tokenizer,
        template,
        vocab: await vocab,
        ...(opts.bindHost !== undefined ? { bindHost: opts.bindHost } : {}),
        ...(opts.log !== undefined ? { log: opts.log } : {}),
      });
      pods.push(p);
      await p.start();
    }
  } catch (e) {
    await closeAll();
    throw e;
  }
  return { pods, settings, close: closeAll };
}
