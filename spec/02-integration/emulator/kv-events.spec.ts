import { Unpackr } from 'msgpackr';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Dealer, Subscriber } from 'zeromq';
import { waitFor } from '../../helpers/ports.js';
import { LORA, MODEL, postJson, startTestFleet, type TestFleet } from './emulator-fleet.js';

// Decoded with msgpackr (independent of the emulator's own encoder); uint64 hashes as BigInt.
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: 'bigint' });

interface Frame {
  topic: string;
  seq: bigint;
  payload: Buffer;
  batch: [number, unknown[], number];
}

type Ev = { type: string; [k: string]: unknown };

/** Normalises either encoding to a map keyed like vLLM's map form (array form by position, v0.12–0.23 layout). */
function eventOf(raw: unknown, format: 'map' | 'array'): Ev {
  if (format === 'map') return raw as Ev;
  const a = raw as unknown[];
  if (a[0] === 'BlockStored') {
    expect(a).toHaveLength(8);
    const [type, block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name] = a;
    return {
      type: type as string,
      block_hashes,
      parent_block_hash,
      token_ids,
      block_size,
      lora_id,
      medium,
      lora_name,
    };
  }
  if (a[0] === 'BlockRemoved') {
    expect(a).toHaveLength(3);
    return { type: 'BlockRemoved', block_hashes: a[1], medium: a[2] };
  }
  expect(a).toEqual(['AllBlocksCleared']);
  return { type: 'AllBlocksCleared' };
}

const seq8 = (n: bigint): Buffer => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(n);
  return b;
};

async function replay(
  endpoint: string,
  start: (Buffer | string)[],
): Promise<{ seq: bigint; payload: Buffer }[]> {
  const d = new Dealer({ linger: 0, receiveTimeout: 5000 });
  d.connect(endpoint);
  try {
    await d.send(start);
    const out: { seq: bigint; payload: Buffer }[] = [];
    for (;;) {
      const msg = await d.receive();
      expect(msg).toHaveLength(3);
      const [empty, seq, payload] = msg as [Buffer, Buffer, Buffer];
      expect(empty.length).toBe(0);
      if (seq.equals(Buffer.alloc(8, 0xff))) {
        expect(payload.length).toBe(0);
        return out;
      }
      out.push({ seq: seq.readBigUInt64BE(), payload });
    }
  } finally {
    d.close();
  }
}

describe.each(['map', 'array'] as const)('KV events over ZMQ, %s encoding', (format) => {
  let f: TestFleet;
  let base: string;
  let pub: string;
  let router: string;
  let sub: Subscriber;
  const frames: Frame[] = [];
  let n = 0;
  /** Completed (re)connections of the subscriber: a restarted pod binds a new PUB socket. */
  let connects = 0;
  const ids = (len: number, salt: number): number[] =>
    Array.from({ length: len }, (_, i) => 1000 + ((i * 7 + salt * 7919) % 30000));
  const complete = (prompt: number[], model = MODEL) =>
    postJson(`${base}/v1/completions`, { model, prompt, max_tokens: 1, ignore_eos: true });
  const events = (from = 0): Ev[] =>
    frames.slice(from).flatMap((fr) => fr.batch[1].map((e) => eventOf(e, format)));
  /** The BlockStored whose tokens are exactly `tokens` (frames can arrive after the HTTP response). */
  const storedOf = (tokens: number[]): Ev | undefined =>
    events().find((e) => e.type === 'BlockStored' && JSON.stringify(e.token_ids) === JSON.stringify(tokens));

  beforeAll(async () => {
    // A small cache (64 blocks) so that eviction happens with a few requests.
    f = await startTestFleet(1, { kv_events_format: format, time_scale: 50, kv_capacity_tokens: 1024 });
    const p = f.pods[0] as { base: string; kvEvents: string; kvReplay: string };
    [base, pub, router] = [p.base, p.kvEvents, p.kvReplay];
    sub = new Subscriber({ linger: 0 });
    void (async () => {
      for await (const e of sub.events) if (e.type === 'connect') connects++;
    })();
    sub.connect(pub);
    sub.subscribe('kv');
    void (async () => {
      for await (const [topic, seq, payload] of sub) {
        frames.push({
          topic: (topic as Buffer).toString(),
          seq: (seq as Buffer).readBigUInt64BE(),
          payload: payload as Buffer,
          batch: unpackr.unpack(payload as Buffer) as Frame['batch'],
        });
      }
    })();
    // PUB/SUB slow joiner: publish until the subscription is live.
    await waitFor('first KV event frame', async () => {
      await complete(ids(20, 1000 + n++));
      return frames.length > 0;
    });
  });
  afterAll(async () => {
    sub?.close();
    await f?.close();
  });

  it('publishes [topic, seq (8B BE), msgpack batch] with consecutive sequence numbers', async () => {
    const prompt = ids(48, 1);
    expect((await complete(prompt)).status).toBe(200);
    const stored = await waitFor('BlockStored of the prompt', () => storedOf(prompt));
    for (const fr of frames) {
      expect(fr.topic).toBe('kv');
      const [ts, evs, rank] = fr.batch;
      expect(typeof ts).toBe('number');
      expect(Math.abs(ts - Date.now() / 1000)).toBeLessThan(60);
      expect(evs.length).toBeGreaterThan(0);
      expect(rank).toBe(0);
    }
    frames.slice(1).forEach((fr, i) => expect(fr.seq).toBe((frames[i] as Frame).seq + 1n));
    expect(stored.block_hashes).toHaveLength(3);
    for (const h of stored.block_hashes as unknown[])
      expect(typeof h === 'bigint' || typeof h === 'number').toBe(true);
    expect(stored.parent_block_hash).toBeNull();
    expect(stored).toMatchObject({ block_size: 16, lora_id: null, medium: 'GPU', lora_name: null });
    if (format === 'map') {
      expect(Object.keys(stored)).toEqual([
        'type',
        'block_hashes',
        'parent_block_hash',
        'token_ids',
        'block_size',
        'lora_id',
        'medium',
        'lora_name',
        'extra_keys',
        'group_idx',
        'kv_cache_spec_kind',
      ]);
      expect(stored).toMatchObject({
        extra_keys: [null, null, null],
        group_idx: 0,
        kv_cache_spec_kind: 'full_attention',
      });
    }
  });

  it('chains a continuation to its parent and carries the LoRA name', async () => {
    const prompt = ids(48, 2);
    await complete(prompt);
    await complete([...prompt, ...ids(32, 3)]);
    await complete(prompt.slice(0, 32), LORA);
    const a = await waitFor('first', () => storedOf(prompt));
    // The continuation hit all three blocks of the first prompt and stored only its own two.
    const b = await waitFor('continuation', () => storedOf(ids(32, 3)));
    const lora = await waitFor('LoRA', () => storedOf(prompt.slice(0, 32)));
    expect(b.parent_block_hash).toEqual((a.block_hashes as unknown[])[2]);
    expect(lora).toMatchObject({ lora_name: LORA, lora_id: 1 });
    // Same tokens, different adapter: nothing hit, so both blocks are stored with their own hashes.
    expect(lora.block_hashes).toHaveLength(2);
    expect((lora.block_hashes as unknown[])[0]).not.toEqual((a.block_hashes as unknown[])[0]);
    if (format === 'map') expect(lora.extra_keys).toEqual([[LORA], [LORA]]);
  });

  it('emits BlockRemoved when a cached block is reused', async () => {
    const from = frames.length;
    // 64-block cache: three 30-block prompts cannot all stay cached.
    for (let i = 0; i < 3; i++) await complete(ids(480, 10 + i));
    await waitFor('BlockRemoved', () => events(from).some((e) => e.type === 'BlockRemoved'));
    const everStored = new Set(
      events().flatMap((e) => (e.type === 'BlockStored' ? (e.block_hashes as unknown[]).map(String) : [])),
    );
    for (const r of events(from).filter((e) => e.type === 'BlockRemoved')) {
      expect(r.block_hashes).toHaveLength(1);
      expect(everStored.has(String((r.block_hashes as unknown[])[0]))).toBe(true);
      expect(r.medium).toBe('GPU');
    }
  });

  it('queues AllBlocksCleared on reset and publishes it first in the next step’s batch, not while idle', async () => {
    const nextSeq = async (): Promise<number> => {
      const s = (await (await fetch(`${base}/emulator/state`)).json()) as {
        ranks: { next_kv_event_seq: number }[];
      };
      return (s.ranks[0] as { next_kv_event_seq: number }).next_kv_event_seq;
    };
    await complete(ids(40, 77));
    const seq = await nextSeq();
    await waitFor('the batches so far', () => frames.some((fr) => fr.seq === BigInt(seq - 1)));
    const res = await fetch(`${base}/reset_prefix_cache`, { method: 'POST' });
    expect(res.status).toBe(200);
    // vLLM's BlockPool.reset_prefix_cache only queues the event; an idle engine core publishes nothing.
    expect(await nextSeq()).toBe(seq);
    const prompt = ids(40, 78);
    await complete(prompt);
    const next = await waitFor('the next step’s batch', () => frames.find((fr) => fr.seq === BigInt(seq)));
    const evs = next.batch[1].map((e) => eventOf(e, format));
    expect(evs[0]).toEqual({ type: 'AllBlocksCleared' });
    expect(evs[1]).toMatchObject({ type: 'BlockStored', parent_block_hash: null });
    expect(evs[1]?.token_ids).toEqual(prompt.slice(0, 32));
    expect(evs.filter((e) => e.type === 'AllBlocksCleared')).toHaveLength(1);
  });

  it('replays buffered batches over ROUTER with the end marker (DEALER client)', async () => {
    const live = new Map(frames.map((fr) => [fr.seq, fr.payload]));
    const all = await replay(router, ['', seq8(0n)]);
    expect(all[0]?.seq).toBe(0n);
    all.slice(1).forEach((r, i) => expect(r.seq).toBe((all[i] as { seq: bigint }).seq + 1n));
    expect(all.at(-1)?.seq).toBeGreaterThanOrEqual(frames.at(-1)?.seq ?? 0n);
    for (const r of all) if (live.has(r.seq)) expect(r.payload.equals(live.get(r.seq) as Buffer)).toBe(true);
    const mid = (frames.at(-1) as Frame).seq - 2n;
    const tail = await replay(router, ['', seq8(mid)]);
    expect(tail[0]?.seq).toBe(mid);
    // A request of other than 3 frames is ignored; the socket keeps serving.
    const d = new Dealer({ linger: 0 });
    d.connect(router);
    await d.send(['', seq8(0n), 'extra']);
    d.close();
    expect((await replay(router, ['', seq8(mid)]))[0]?.seq).toBe(mid);
    // Like vLLM's int.from_bytes(start, "big"): any length (empty = 0), and the delimiter is not read.
    const short = Buffer.alloc(2);
    short.writeUInt16BE(Number(mid));
    expect((await replay(router, ['', short]))[0]?.seq).toBe(mid);
    expect((await replay(router, ['', Buffer.alloc(0)]))[0]?.seq).toBe(0n);
    expect((await replay(router, ['not-empty', seq8(mid)]))[0]?.seq).toBe(mid);
    expect(await replay(router, ['', Buffer.alloc(9, 0xff)])).toEqual([]);
  });

  it('restarts the sequence at 0 when the pod restarts', async () => {
    const before = (frames.at(-1) as Frame).seq;
    const connected = connects;
    expect((await postJson(`${base}/emulator/restart`, {})).status).toBe(200);
    // Frames published before the subscriber has reconnected to the new socket are lost (as with a real
    // restarted vLLM); traffic starts once it has, so the first frame seen is near the new sequence's start.
    await waitFor('the subscriber reconnected to the restarted pod', () => connects > connected);
    const after = frames.length;
    await waitFor('a frame after the restart', async () => {
      await complete(ids(20, 100 + n++));
      return frames.length > after;
    });
    expect((frames[after] as Frame).seq).toBeLessThan(before);
    const replayed = await replay(router, ['', seq8(0n)]);
    expect(replayed[0]?.seq).toBe(0n);
    expect(replayed.at(-1)?.seq).toBe(frames.at(-1)?.seq);
  });
});
