// collectorRig: the private Redis, index, collector and publisher of a collector spec, and their hooks.
import type { Server } from 'node:http';
import { afterAll, afterEach, beforeAll } from 'vitest';
import type { Collector } from '../../../src/collector/collector.js';
import { createKvIndex, type KvIndex, type KvIndexOptions } from '../../../src/index/index.js';
import { startRedis, type TestRedis } from '../redis-server.js';
import type { FakeVllmPublisher } from './fake-publisher.js';

type RedisIndexOptions = Extract<KvIndexOptions, { kind: 'redis' }>;

export interface CollectorRigOptions extends Omit<RedisIndexOptions, 'kind' | 'url'> {
  /** Each spec file's own prefix, so that what one leaves in Redis is never another's. */
  keyPrefix: string;
  /** Builds the index (default createKvIndex; observerIndex for lookups with seconds to answer). */
  index?: (opts: RedisIndexOptions) => KvIndex;
  /**
   * When the collector, the publisher and the server are stopped: after each test (default), or once after
   * the describe's tests, for a describe that starts them in its own beforeAll and shares them.
   */
  stopAfter?: 'each' | 'all';
  /** The spec's own things to stop at the same time: after the publisher closes, before the server does. */
  cleanup?: () => Promise<void> | void;
}

/**
 * What the hooks set up. Reading a slot that holds nothing throws (a test that forgot to start it); a test
 * may empty `collector` or `pub` itself (null) once it stopped them.
 */
export interface CollectorRig {
  get redis(): TestRedis;
  get index(): KvIndex;
  get collector(): Collector;
  set collector(c: Collector | null);
  get pub(): FakeVllmPublisher;
  set pub(p: FakeVllmPublisher | null);
  /** A pod's /metrics endpoint, closed after the publisher. */
  get server(): Server;
  set server(s: Server | null);
}

function empty(slot: string): never {
  throw new Error(`collectorRig: no ${slot} yet (set it in the test, or read it after beforeAll)`);
}

/**
 * Why: the collector integration specs each run against a private Redis and an index of their own, stop the
 * collector before closing its publisher, and close the index before stopping Redis; those hooks were
 * repeated, slot by slot, in every file. Call this at the top of a describe: its beforeAll starts Redis and
 * creates the index; afterEach (or afterAll, `stopAfter: 'all'`) stops the collector, closes the publisher,
 * runs `cleanup`, closes the server and empties those slots; afterAll then closes the index and stops Redis.
 * Hooks the describe registers itself run after this beforeAll, and before this afterEach and afterAll.
 */
export function collectorRig(opts: CollectorRigOptions): CollectorRig {
  const { index: makeIndex = createKvIndex, stopAfter = 'each', cleanup, ...indexOpts } = opts;
  let redis: TestRedis | null = null;
  let index: KvIndex | null = null;
  let collector: Collector | null = null;
  let pub: FakeVllmPublisher | null = null;
  let server: Server | null = null;

  const stop = async (): Promise<void> => {
    await collector?.stop();
    await pub?.close();
    await cleanup?.();
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    collector = null;
    pub = null;
    server = null;
  };

  beforeAll(async () => {
    redis = await startRedis();
    index = makeIndex({ kind: 'redis', url: redis.url, ...indexOpts });
  });
  if (stopAfter === 'each') afterEach(stop);
  afterAll(async () => {
    if (stopAfter === 'all') await stop();
    await index?.close();
    await redis?.stop();
  });

  return {
    get redis() {
      return redis ?? empty('redis');
    },
    get index() {
      return index ?? empty('index');
    },
    get collector() {
      return collector ?? empty('collector');
    },
    set collector(c) {
      collector = c;
    },
    get pub() {
      return pub ?? empty('publisher');
    },
    set pub(p) {
      pub = p;
    },
    get server() {
      return server ?? empty('server');
    },
    set server(s) {
      server = s;
    },
  };
}
