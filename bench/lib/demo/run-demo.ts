// `kinference demo`: random routing against kinference on the live stack, shared-prefix chats, a table.
import cliProgress from 'cli-progress';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { percentile } from '../stats/percentile.js';
import { Rng } from '../rng.js';
import { clientRandomRouter, kubeProxyArm } from '../arms/kube-proxy.js';
import { loadModelSetup } from '../setup.js';
import { PUBLISHED_SHAPES, WorkloadFactory, type WorkloadShapes } from '../workload/workloads.js';
import { ConversationClient } from '../workload/client.js';
import { chatBody } from '../workload/prepare.js';
import { streamChat, type StreamTiming } from '../live/http-client.js';
import { resetPrefixCaches, startLiveStack, type LiveStack } from '../live/stack.js';

export interface DemoOptions {
  timeScale: number;
  requests: number;
  concurrency: number;
  prefixes: number;
  prefixTokens: number;
  otlpEndpoint?: string;
  /** Where the fleet's logs go (default: a new file in the temporary directory). */
  childLog?: string;
  /** A Redis to use when redis-server cannot be started here. */
  redisUrl?: string;
  seed: number;
}

type Arm = 'random' | 'kinference';

interface ArmResult {
  arm: Arm;
  ok: number;
  failed: number;
  ttftS: number[];
  cachedFraction: number;
}

/**
 * One arm, closed loop: `concurrency` clients send the shared-prefix conversations one after another.
 * random is what a Kubernetes Service gives a keep-alive client: kube-proxy's pick per connection (the
 * benchmark's random arm), on the model's clock so the 5 s keep-alive means the same as in production.
 */
async function runArm(
  arm: Arm,
  stack: LiveStack,
  factory: WorkloadFactory,
  model: string,
  o: DemoOptions,
  bar: cliProgress.SingleBar,
): Promise<ArmResult> {
  const client = new ConversationClient(factory);
  const kubeProxy = clientRandomRouter(
    kubeProxyArm(Rng.derive(o.seed, 0, 'demo-random')),
    stack.pods.map((p) => p.id),
  );
  const t0 = performance.now();
  const modelNow = (): number => (performance.now() - t0) * o.timeScale;
  const out: ArmResult = { arm, ok: 0, failed: 0, ttftS: [], cachedFraction: 0 };
  let sent = 0;
  let cached = 0;
  let prompt = 0;
  // The first wave starts every pod cold at once; like GuideLLM's warm-up window, it is not measured.
  const warmup = warmupRequests(o);
  const total = warmup + o.requests;
  const worker = async (id: number): Promise<void> => {
    while (sent < total) {
      const measured = sent >= warmup;
      sent++;
      const turn = await client.next();
      const route = arm === 'random' ? kubeProxy.choose(id, modelNow()) : null;
      const target = route ? stack.pods.find((p) => p.id === route.podId)! : stack.gateway;
      const t: StreamTiming = await streamChat(target.host, target.port, chatBody(turn, model));
      if (route) kubeProxy.release(route, id, modelNow());
      client.complete(turn, t.ok ? t.text : null);
      if (!measured) {
        if (!t.ok) out.failed++;
      } else if (t.ok && t.firstTokenMs !== null) {
        out.ok++;
        out.ttftS.push(((t.firstTokenMs - t.startMs) * o.timeScale) / 1000);
        cached += t.cachedTokens;
        prompt += t.promptTokens;
      } else out.failed++;
      bar.increment(1, { arm });
    }
  };
  await Promise.all(Array.from({ length: o.concurrency }, (_, i) => worker(i)));
  out.cachedFraction = prompt > 0 ? cached / prompt : 0;
  return out;
}

export function warmupRequests(o: Pick<DemoOptions, 'concurrency'>): number {
  return 2 * o.concurrency;
}

const fmtS = (x: number): string => (Number.isFinite(x) ? `${x.toFixed(2)} s` : 'n/a');

function table(results: ArmResult[]): string {
  const [r, k] = results as [ArmResult, ArmResult];
  const row = (name: string, a: string, b: string, change = ''): string =>
    `| ${name.padEnd(24)} | ${a.padStart(12)} | ${b.padStart(12)} | ${change.padStart(8)} |`;
  const change = (a: number, b: number): string => (a > 0 ? `${(((b - a) / a) * 100).toFixed(0)}%` : '');
  const lines = [
    row('', 'random', 'kinference', 'change'),
    `|${'-'.repeat(26)}|${'-'.repeat(14)}|${'-'.repeat(14)}|${'-'.repeat(10)}|`,
  ];
  // About half of random's requests hit the cache, so its median falls on either side of the cliff from one
  // run to the next; the mean does not.
  const mean = (xs: readonly number[]): number => xs.reduce((x, y) => x + y, 0) / xs.length;
  for (const [name, stat] of [
    ['median TTFT', (xs: readonly number[]) => percentile(xs, 0.5)],
    ['mean TTFT', mean],
    ['p95 TTFT', (xs: readonly number[]) => percentile(xs, 0.95)],
  ] as const) {
    const a = stat(r.ttftS);
    const b = stat(k.ttftS);
    lines.push(row(name, fmtS(a), fmtS(b), change(a, b)));
  }
  lines.push(
    row(
      'prompt tokens from cache',
      `${(r.cachedFraction * 100).toFixed(0)}%`,
      `${(k.cachedFraction * 100).toFixed(0)}%`,
    ),
  );
  lines.push(row('requests ok / failed', `${r.ok} / ${r.failed}`, `${k.ok} / ${k.failed}`));
  return lines.join('\n');
}

export async function runDemo(o: DemoOptions): Promise<void> {
  const log = (s: string): void => void process.stderr.write(`${s}\n`);
  log('kinference demo: loading the Qwen3 tokenizer and starting the local fleet…');
  // The fleet's own logs (JSON lines of the emulator, collector and gateway) go to a file: the terminal keeps
  // the progress and the table.
  const childLog =
    o.childLog ?? join(tmpdir(), `kinference-demo-${new Date().toISOString().replace(/[:.]/g, '-')}.log`);
  log(`  the fleet's logs: ${childLog}`);
  const model = await loadModelSetup();
  const shapes: WorkloadShapes = {
    ...PUBLISHED_SHAPES,
    'shared-prefix': {
      prefixCount: o.prefixes,
      prefixTokens: o.prefixTokens,
      promptTokens: 128,
      outputTokens: 64,
    },
  };
  const cli = fileURLToPath(new URL('../../../../bin/kinference.js', import.meta.url));
  const stack = await startLiveStack({
    childLog,
    pods: 3,
    profile: 'l40s-27b-fp8',
    kvCapacityTokens: 94_208,
    timeScale: o.timeScale,
    seed: o.seed,
    scrapeIntervalMs: 1000,
    model,
    cli,
    ...(o.otlpEndpoint ? { otlpEndpoint: o.otlpEndpoint } : {}),
    ...(o.redisUrl ? { redisUrl: o.redisUrl } : {}),
  }).catch((e: unknown) => {
    log(`kinference demo: the fleet did not start; its logs: ${childLog}`);
    throw e;
  });
  const stopOnSignal = (): void => {
    void stack.stop().finally(() => process.exit(130));
  };
  process.once('SIGINT', stopOnSignal);
  process.once('SIGTERM', stopOnSignal);
  try {
    log(`  redis ${stack.redis.url}`);
    log(
      `  pods ${stack.pods.map((p) => `${p.id}=${p.host}:${p.port}`).join('  ')} (emulated L40S, 27B FP8, ${o.timeScale}× faster)`,
    );
    log(`  Kong stand-in with the kinference plugin on http://${stack.gateway.host}:${stack.gateway.port}`);
    log(
      `workload: ${warmupRequests(o)} + ${o.requests} chat requests per arm, ${o.concurrency} at a time, each on one of ${o.prefixes} system prompts of ${o.prefixTokens} tokens + a 128-token question`,
    );
    const bar = new cliProgress.SingleBar(
      {
        format: ' {bar} {value}/{total} requests | {arm}',
        hideCursor: true,
        noTTYOutput: true,
        notTTYSchedule: 5000,
      },
      cliProgress.Presets.shades_classic,
    );
    bar.start((o.requests + warmupRequests(o)) * 2, 0, { arm: 'random' });
    const results: ArmResult[] = [];
    for (const arm of ['random', 'kinference'] as const) {
      // Both arms start from cold pods (the reset and the step that publishes its AllBlocksCleared).
      await resetPrefixCaches(stack);
      const factory = new WorkloadFactory('shared-prefix', shapes, model.synth, o.seed, 0);
      results.push(await runArm(arm, stack, factory, model.model, o, bar));
    }
    bar.stop();
    console.log('');
    console.log(
      `Time to first token, in model time (the emulated pods run ${o.timeScale}× faster than an L40S):`,
    );
    console.log(table(results));
    console.log('');
    console.log('Where to look next:');
    console.log(
      o.otlpEndpoint
        ? `  traces: every routing decision was exported to ${o.otlpEndpoint}; in Jaeger (http://localhost:16686) pick service "kinference".`
        : '  traces: start Jaeger (`docker compose up jaeger`) and rerun with --otlp-endpoint http://localhost:4318/v1/traces, then open http://localhost:16686.',
    );
    console.log(
      '  one decision, explained: node bin/kinference.js explain --config examples/fleet.yaml --body examples/chat-request.json',
    );
    console.log('  the full benchmark (all arms, three workloads): npm run bench:seed');
    console.log(`  the fleet's logs (emulator, collector, gateway): ${childLog}`);
  } finally {
    await stack.stop();
    process.removeListener('SIGINT', stopOnSignal);
    process.removeListener('SIGTERM', stopOnSignal);
  }
}
