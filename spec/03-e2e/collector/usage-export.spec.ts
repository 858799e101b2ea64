import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UsageWriter, createUsageRedis } from '../../../src/usage/index.js';
import { FakeVllmPublisher } from '../../helpers/collector/fake-publisher.js';
import { BS, MODEL } from '../../helpers/collector/collector-harness.js';
import { freePort, waitFor } from '../../helpers/ports.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';

/**
 * The fleet's usage on `kinference collector`'s /metrics (real processes, real Redis): what the Kong nodes'
 * plugins wrote, per class and model, exported by the collector holding the writer lease and by no standby,
 * so a sum over both collectors' targets counts it once.
 */
const PREFIX = 'kue';

function startCollector(config: string): { proc: ChildProcess; exited: Promise<unknown> } {
  const proc = spawn(process.execPath, ['--import', 'tsx', 'cli/main.ts', 'collector', '--config', config], {
    stdio: ['ignore', 'ignore', 'ignore'],
  });
  return { proc, exited: new Promise((r) => proc.once('exit', r)) };
}

const metrics = async (listen: string): Promise<string> => (await fetch(`http://${listen}/metrics`)).text();

describe(
  'usage series on the collector: the lease holder exports them, a standby does not',
  { timeout: 120_000 },
  () => {
    let redis: TestRedis;
    let pub: FakeVllmPublisher;
    let dir: string;
    const procs: { proc: ChildProcess; exited: Promise<unknown> }[] = [];

    beforeAll(async () => {
      redis = await startRedis();
      pub = await new FakeVllmPublisher({ format: 'map' }, { topic: 'kv' }).bind();
      dir = mkdtempSync(join(tmpdir(), 'kinf-usage-export-'));
    });
    afterAll(async () => {
      for (const p of procs)
        if (p.proc.exitCode === null && p.proc.signalCode === null) {
          p.proc.kill('SIGKILL');
          await p.exited;
        }
      await pub?.close();
      await redis?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('two collectors: one exports the usage totals, the standby none', async () => {
      const client = createUsageRedis({ url: redis.url });
      const w = new UsageWriter(client, { keyPrefix: PREFIX, retentionDays: 1 });
      for (const tenant of ['a', 'b', 'c'])
        await w.record({
          atMs: Date.now(),
          tenant,
          serviceClass: 'standard',
          model: MODEL,
          shed: false,
          promptTokens: 100,
          cachedTokens: 32,
          output: { tokens: 7, exact: false, streamed: true },
          ttftMs: 90,
          cost: { cost: 0.001, saving: 0.0002 },
        });
      client.disconnect();

      const listens: string[] = [];
      for (const name of ['one', 'two']) {
        const listen = `127.0.0.1:${await freePort()}`;
        const config = join(dir, `${name}.yaml`);
        writeFileSync(
          config,
          [
            `redis_url: ${redis.url}`,
            `redis_key_prefix: ${PREFIX}`,
            'models:',
            `  ${MODEL}: { tokenizer: "tiktoken:o200k_base", chat_template: chatml, block_size: ${BS} }`,
            'pods:',
            '  - id: pod-u',
            `    model: ${MODEL}`,
            '    address: 127.0.0.1:18098',
            `    kv_events: ${pub.endpoint}`,
            `    kv_events_replay: ${pub.replayEndpoint}`,
            '    kv_events_topic: kv',
            'collector:',
            `  listen: ${listen}`,
            '  writer_lease_ms: 1500',
            '',
          ].join('\n'),
        );
        listens.push(listen);
        procs.push(startCollector(config));
      }
      const texts = await waitFor(
        'one holder and one standby',
        async () => {
          try {
            const t = await Promise.all(listens.map(metrics));
            const held = t.filter((x) => /^kinference_collector_writer_lease_held 1$/m.test(x)).length;
            const standby = t.filter((x) => /^kinference_collector_standby 1$/m.test(x)).length;
            return held === 1 && standby === 1 ? t : null;
          } catch {
            return null;
          }
        },
        60_000,
        100,
      );
      const holder = texts.find((x) => /^kinference_collector_writer_lease_held 1$/m.test(x))!;
      const standby = texts.find((x) => /^kinference_collector_standby 1$/m.test(x))!;
      expect(holder).toContain(`kinference_usage_requests_total{class="standard",model="${MODEL}"} 3`);
      expect(holder).toContain(`kinference_usage_prompt_tokens_total{class="standard",model="${MODEL}"} 300`);
      expect(holder).toContain(
        `kinference_usage_ttft_seconds_bucket{class="standard",model="${MODEL}",le="0.1"} 3`,
      );
      expect(holder).toMatch(/^kinference_usage_export_up 1$/m);
      expect(standby).not.toMatch(/^kinference_usage_/m);
    });
  },
);
