import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { driveLoad } from '../../../bench/lib/live/drive-load.js';
import { streamChat } from '../../../bench/lib/live/http-client.js';
import { loadTextSynth } from '../../../bench/lib/setup.js';
import { PUBLISHED_SHAPES, WorkloadFactory } from '../../../bench/lib/workload/workloads.js';
import type { TextSynth } from '../../../bench/lib/workload/synth.js';

// The run's end as bench:load has it (cancelAtEnd): what is still streaming then is incomplete, never failed.
describe('driveLoad, cancelling at the end of a run', () => {
  let server: Server;
  let port: number;
  let synth: TextSynth;
  beforeAll(async () => {
    // One token, then the stream stays open: every request is still running when the run ends.
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: 'a' } }] })}\n\n`);
      });
    });
    port = await new Promise<number>((r) =>
      server.listen(0, '127.0.0.1', () => r((server.address() as AddressInfo).port)),
    );
    synth = await loadTextSynth(null);
  }, 30_000);
  afterAll(() => {
    server.closeAllConnections();
    server.close();
  });

  it('counts the requests it cancels as incomplete, though the end timer may fire a fraction of a ms early', async () => {
    const shapes = structuredClone(PUBLISHED_SHAPES);
    shapes.control = { promptTokens: 64, outputTokens: 16 };
    // Timers keep whole milliseconds: one set for the run's end can fire before performance.now() reaches
    // it, and a request cancelled then would end inside the run, as a failure. Short runs, many times.
    const statuses = new Set<string>();
    for (let trial = 0; trial < 40; trial++) {
      const r = await driveLoad({
        profile: {
          kind: 'concurrent',
          streams: 2,
          warmupS: 0,
          measureS: 0.02,
          cooldownS: 0,
          clientWorkers: 1,
        },
        factory: new WorkloadFactory('control', shapes, synth, 1, trial, 'abc'),
        model: 'm',
        seed: 1,
        trial,
        timeScale: 1,
        cancelAtEnd: true,
        send: ({ body, signal }) => streamChat('127.0.0.1', port, body, '/v1/chat/completions', { signal }),
      });
      for (const x of r.records) statuses.add(x.status);
    }
    expect([...statuses]).toEqual(['incomplete']);
  });
});
