import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Router } from 'zeromq';
import { requestReplay } from '../../../src/collector/transport/replay-client.js';
import { END_SEQ, encodeSeq } from '../../../src/collector/wire/frames.js';
import { freePort } from '../../helpers/ports.js';

const BATCHES = 20_000;

/**
 * vLLM's replay thread answers a request by sending its whole buffer in one loop on a plain ROUTER (no
 * ROUTER_MANDATORY, default send high-water mark 1000), and a ROUTER at its high-water mark drops what it
 * cannot queue. A collector that stops reading to let its index catch up must therefore not push back on
 * the ROUTER: the reply has to keep flowing into the collector's memory while it pauses.
 */
describe('replay client against a ROUTER that sends its buffer at once, as vLLM does', () => {
  let router: Router;
  let endpoint: string;
  beforeAll(async () => {
    router = new Router({ linger: 0 });
    endpoint = `tcp://127.0.0.1:${await freePort()}`;
    await router.bind(endpoint);
    void (async () => {
      for await (const [id, , start] of router) {
        const from = Number(start!.readBigUInt64BE(0));
        for (let seq = from; seq < BATCHES; seq++) {
          await router.send([id!, Buffer.alloc(0), encodeSeq(seq), Buffer.alloc(1024, seq % 256)]);
          // Paced so that the ROUTER's own queue drains to TCP as it goes, even on a loaded machine: what can
          // fill it is then the reader's side only. The whole buffer still goes out within the reader's pause.
          if (seq % 100 === 99) await new Promise((r) => setTimeout(r, 2));
        }
        await router.send([id!, Buffer.alloc(0), END_SEQ, Buffer.alloc(0)]);
      }
    })().catch(() => undefined);
  });
  afterAll(() => router.close());

  it('gets every batch and the end marker although it stops reading for a while at the start', async () => {
    const seqs: number[] = [];
    const outcome = await requestReplay(endpoint, 0, 5000, (m) => {
      seqs.push(m.seq);
      // The first item pauses reading while the ROUTER has already sent the whole buffer.
      return seqs.length === 1 ? new Promise((r) => setTimeout(() => r(true), 1000)) : true;
    });
    expect(outcome).toEqual({ kind: 'complete', items: BATCHES });
    expect(seqs).toEqual(Array.from({ length: BATCHES }, (_, i) => i));
  });
});
