/**
 * `npm run bench:fleet -- [--pods 3] [--time-scale 1] [--emulator-profile NAME] [--kv-capacity T]
 * [--admission-ttft-ms MS --admission-itl-ms MS [--admission-config JSON]]`: the
 * benchmark's emulated fleet, kept running for `bench:load` (or curl) until Ctrl-C. Two ways in, as a
 * platform team has them: a Kubernetes Service as kube-proxy makes it (a random pod per TCP connection) and
 * the Kong route with kinference (the Kong stand-in, the plugin in kong-js-pluginserver, the collector, Redis).
 */
import { USAGE, values } from './lib/usage/fleet.js'; // first: --help before the heavy imports
import { fileURLToPath } from 'node:url';
import { getProfile, PROFILES } from '../emulator/profiles.js';
import { numberArg, orUsage } from './lib/cli.js';
import { startKubeProxyTcp } from './lib/live/kube-proxy-tcp.js';
import { startLiveStack } from './lib/live/stack.js';
import { SEED_SCHEDULE } from './lib/schedule.js';
import { loadModelSetup, routerConfig } from './lib/setup.js';
import { PluginConfigSchema } from '../src/config/plugin-config.js';

const positive = (name: string, v: string): number =>
  orUsage('bench:fleet', USAGE, () => numberArg(name, v, 'positive'));
const ttft = values['admission-ttft-ms'];
const itl = values['admission-itl-ms'];
if ((ttft === undefined) !== (itl === undefined)) {
  console.error('bench:fleet: --admission-ttft-ms and --admission-itl-ms go together');
  process.exit(2);
}
// More plugin settings for the admission route (e.g. '{"itl_decode_from_metrics":false}').
let admissionExtra: Record<string, unknown> = {};
if (values['admission-config'] !== undefined) {
  if (ttft === undefined) {
    console.error('bench:fleet: --admission-config needs --admission-ttft-ms and --admission-itl-ms');
    process.exit(2);
  }
  try {
    const v: unknown = JSON.parse(values['admission-config']);
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('not a JSON object');
    admissionExtra = v as Record<string, unknown>;
  } catch (e) {
    console.error(`bench:fleet: --admission-config: ${(e as Error).message}`);
    process.exit(2);
  }
}

const profile = getProfile(values['emulator-profile']);
if (!profile) {
  console.error(
    `bench:fleet: --emulator-profile ${values['emulator-profile']}: one of ${Object.keys(PROFILES).join(', ')}`,
  );
  process.exit(2);
}
// The seed's derived KV cache on its own GPU; another GPU's profile brings its own.
const kvCapacity =
  values['kv-capacity'] ??
  String(
    profile.name === SEED_SCHEDULE.emulatorProfile
      ? SEED_SCHEDULE.kvCapacityTokens
      : profile.kvCapacityTokens,
  );

const model = await loadModelSetup();
// The plugin schema's verdict, before anything starts.
const unknown = Object.keys(admissionExtra).filter((k) => !(k in PluginConfigSchema.properties));
try {
  if (unknown.length > 0) throw new Error(`not plugin settings: ${unknown.join(', ')}`);
  routerConfig(model, admissionExtra);
} catch (e) {
  console.error(`bench:fleet: --admission-config: ${(e as Error).message}`);
  process.exit(2);
}
const stack = await startLiveStack({
  pods: positive('pods', values.pods),
  profile: profile.name,
  kvCapacityTokens: positive('kv-capacity', kvCapacity),
  timeScale: positive('time-scale', values['time-scale']),
  seed: SEED_SCHEDULE.seed,
  scrapeIntervalMs: SEED_SCHEDULE.latency.scrapeIntervalMs,
  model,
  cli: fileURLToPath(new URL('../../bin/kinference.js', import.meta.url)),
  ...(ttft !== undefined && itl !== undefined
    ? {
        admission: {
          shed_ttft_slo_ms: positive('admission-ttft-ms', ttft),
          itl_slo_ms: positive('admission-itl-ms', itl),
          ...admissionExtra,
        },
      }
    : {}),
});
const service = await startKubeProxyTcp(stack.pods);

const path = '/v1/chat/completions';
const urls = {
  service: `http://${service.host}:${service.port}${path}`,
  kinference: `http://${stack.gateway.host}:${stack.gateway.port}${path}`,
  ...(stack.sloPath
    ? { 'kinference-slo': `http://${stack.gateway.host}:${stack.gateway.port}${stack.sloPath}` }
    : {}),
};
console.log(
  `bench:fleet ready: ${stack.pods.length} emulated pods (${profile.name}, ${kvCapacity} KV tokens each), model ${model.model}`,
);
for (const [k, u] of Object.entries(urls)) console.log(`  ${k.padEnd(15)} ${u}`);
console.log(
  `try:\n  npm run bench:load -- --url ${urls.service} --model ${model.model} --workload shared-prefix --rate 0.27 --seed 7 --name service\n` +
    `  npm run bench:load -- --url ${urls.kinference} --model ${model.model} --workload shared-prefix --rate 0.27 --seed 7 --name kinference\n` +
    `  npm run bench:load -- --compare bench/results/service.json bench/results/kinference.json\n` +
    'Ctrl-C stops the fleet.',
);

let stopping = false;
const stop = async (): Promise<void> => {
  if (stopping) return;
  stopping = true;
  const byPod = [...service.connections].map(([id, n]) => `${id} ${n}`).join(', ');
  console.log(`\nstopping (service connections per pod: ${byPod})`);
  await service.close();
  await stack.stop();
  process.exit(0);
};
process.on('SIGINT', () => void stop());
process.on('SIGTERM', () => void stop());
