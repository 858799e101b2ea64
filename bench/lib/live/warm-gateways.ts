// What every live benchmark does before its first cell: a stack sized by the schedule, its gateways warmed.
import type { BenchSchedule } from '../schedule.js';
import type { ModelSetup } from '../setup.js';
import { streamChat } from './http-client.js';
import type { LiveStack, LiveStackOptions } from './stack.js';

/** The stack options the schedule fixes: the fleet, the emulator profile, KV size, seed, scrape interval. */
export function scheduleStack(
  s: BenchSchedule,
  o: { timeScale: number; model: ModelSetup; cli: string },
): LiveStackOptions {
  return {
    pods: s.pods,
    profile: s.emulatorProfile,
    kvCapacityTokens: s.kvCapacityTokens,
    timeScale: o.timeScale,
    seed: s.seed,
    scrapeIntervalMs: s.latency.scrapeIntervalMs,
    model: o.model,
    cli: o.cli,
  };
}

/**
 * One short streamed request through every Kong node of the stack (on `path`, default the chat route), so the
 * cell does not pay a plugin instance's start. A refusal stops the run; a stream the pod ended badly is
 * worth a line, not the run (the instance started either way), unless `strict` (bench:live, whose cell
 * compares with its twin from the first request).
 */
export async function warmGateways(
  stack: LiveStack,
  m: ModelSetup,
  o: { path?: string; strict?: boolean } = {},
): Promise<void> {
  const body = JSON.stringify({
    model: m.model,
    messages: [{ role: 'user', content: 'warm up' }],
    max_tokens: 1,
    stream: true,
  });
  for (const gw of stack.gateways) {
    const t = await streamChat(gw.host, gw.port, body, o.path);
    if (t.status !== 200 || (o.strict && !t.ok))
      throw new Error(`warm-up through ${gw.host}:${gw.port}: HTTP ${t.status} ${t.error ?? ''}`.trim());
    if (!t.ok) console.error(`warm-up through ${gw.host}:${gw.port}: ${t.error ?? 'not ok'}`);
  }
}
