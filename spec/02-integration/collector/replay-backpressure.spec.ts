import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Router } from 'zeromq';
import { requestReplay } from '../../../src/collector/transport/replay-client.js';
import { END_SEQ, encodeSeq } from '../../../src/collector/wire/frames.js';
import { freePort } from '../../helpers/ports.js';

const BATCHES = 20_000;
/** Only ends the reader's pause if the ROUTER is held back for good (the defect): a hang detector, not a pace. */
const HELD_BACK_MS = 20_000;

/**
 * vLLM's replay thread answers a request by sending its whole buffer in one loop on a plain ROUTER (no
 * ROUTER_MANDATORY, default send high-water mark 1000), and a ROUTER at its high-water mark drops what it
 * cannot queue. A collector that stops reading to let its index catch up must therefore not push back on
 * the ROUTER: the reply has to keep flowing into the collector's memory while it pauses.
 *
 * The ROUTER here is ROUTER_MANDATORY, so a full queue makes a send wait instead of dropping: pushback shows
 * as a sender that cannot finish, not as a loss whose timing depends on how busy the machine is (its own
 * queue draining to TCP late under load dropped batches when it was a plain ROUTER paced by the clock). The
 * reader pauses until the ROUTER has sent the whole buffer: it must get there while nobody reads.
 */
describe('replay client against a ROUTER that sends its buffer at once, as vLLM does', () => {
  let router: Router;
  let endpoint: string;
  let sentAll: Promise<void>;
  beforeAll(async () => {
    router = new Router({ linger: 0, mandatory: true });
    endpoint = `tcp://127.0.0.1:${await freePort()}`;
    await router.bind(endpoint);
    sentAll = (async () => {
      for await (const [id, , start] of router) {
        const from = Number(start!.readBigUInt64BE(0));
        for (let seq = from; seq < BATCHES; seq++)
          await router.send([id!, Buffer.alloc(0), encodeSeq(seq), Buffer.alloc(1024, seq % 256)]);
        await router.send([id!, Buffer.alloc(0), END_SEQ, Buffer.alloc(0)]);
        return;
      }
    })();
    sentAll.catch(() => undefined);
  });
  afterAll(() => router.close());

  it('gets every batch and the end marker, and the ROUTER sends them all while the reader is paused', async () => {
    const seqs: number[] = [];
    let sentWhilePaused = false;
    const outcome = await requestReplay(endpoint, 0, 5000, (m) => {
      seqs.push(m.seq);
      if (seqs.length > 1) return true;
      // The first item pauses reading until the ROUTER has sent everything, as vLLM's would at once.
      let timer: NodeJS.Timeout | undefined;
      const heldBack = new Promise<boolean>((r) => (timer = setTimeout(() => r(false), HELD_BACK_MS)));
      return Promise.race([sentAll.then(() => true), heldBack]).then((sent) => {
        clearTimeout(timer);
        sentWhilePaused = sent;
        return true;
      });
    });
    expect(sentWhilePaused, 'the paused reader held the ROUTER back').toBe(true);
    expect(outcome).toEqual({ kind: 'complete', items: BATCHES });
    expect(seqs).toEqual(Array.from({ length: BATCHES }, (_, i) => i));
  }, 60_000);
});
