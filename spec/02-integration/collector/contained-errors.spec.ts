import { beforeAll, describe, expect, it } from 'vitest';
import { Collector } from '../../../src/collector/collector.js';
import { StaticDiscovery } from '../../../src/collector/discovery/static.js';
import { silentLogger } from '../../../src/collector/logger.js';
import type { StreamWorker } from '../../../src/collector/stream-worker.js';
import { waitFor } from '../../helpers/ports.js';
import { FakeVllmPublisher } from '../../helpers/collector/fake-publisher.js';
import {
  BS,
  MODEL,
  blockStored,
  freshTokens,
  hashCounter,
  testSettings,
  waitCached,
  waitSubscribed,
} from '../../helpers/collector/collector-harness.js';
import { collectorRig } from '../../helpers/collector/collector-rig.js';
import { observerIndex } from '../../helpers/observer-index.js';

const hashes = hashCounter(7n << 40n);

/**
 * Issue #36: no exception from a metrics library or an observer may end the process. A hook told of every
 * write that throws (as prom-client's histogram did on a non-finite value) is contained in its stream:
 * counted in internal_errors_total{stage="observer"}, and the stream goes on writing.
 */
describe('a throwing observer of index writes (real ZMQ and Redis)', () => {
  const rig = collectorRig({ keyPrefix: 'kobs', index: observerIndex, stopAfter: 'all' });
  const w = (): StreamWorker => rig.collector.worker('pod-o')!;

  beforeAll(async () => {
    rig.pub = await new FakeVllmPublisher({ format: 'array' }).bind();
    rig.collector = new Collector(testSettings(), {
      index: rig.index,
      discovery: new StaticDiscovery([
        {
          id: 'pod-o',
          model: MODEL,
          address: '127.0.0.1:18046',
          kv_events: rig.pub.endpoint,
          kv_events_replay: rig.pub.replayEndpoint,
        },
      ]),
      log: silentLogger,
      blockSizes: { [MODEL]: BS },
      onApplied: () => {
        throw new TypeError('Value is not a valid number: Infinity');
      },
    });
    await rig.collector.start();
    await waitSubscribed(rig.pub, w);
  });

  it('is counted and logged; the stream goes on indexing', async () => {
    for (let i = 0; i < 3; i++) {
      const t = freshTokens(2);
      await rig.pub.publish([blockStored(hashes(2), null, t)]);
      await waitCached(rig.index, 'pod-o', t, 2);
    }
    await waitFor('observer errors counted', () => w().stats.internalErrors.observer >= 3);
    const text = await rig.collector.metrics.registry.metrics();
    expect(text).toMatch(/kinference_collector_internal_errors_total\{pod="pod-o",stage="observer"\} [3-9]/);
  });
});
