import { describe, expect, it } from 'vitest';
import { Collector } from '../../../src/collector/collector.js';
import type { Discovery } from '../../../src/collector/discovery/discovery.js';
import { silentLogger } from '../../../src/collector/logger.js';
import type { PodSpec } from '../../../src/collector/pods.js';
import { createKvIndex } from '../../../src/index/index.js';
import { BS, MODEL, testSettings } from '../../helpers/collector/collector-harness.js';
import { waitFor } from '../../helpers/ports.js';

const pod = (id: string, ready: boolean): PodSpec => ({
  id,
  model: MODEL,
  address: `10.0.0.${id.at(-1)}:8000`,
  topic: '',
  dataParallelSize: 1,
  ...(ready ? {} : { ready: false }),
});

/** Kubernetes as a collector sees it when it starts: a list, some pods failing their readiness probe. */
const listed = (pods: PodSpec[]): Discovery => ({
  notReadyGraceMs: 300_000,
  synced: true,
  async start(onChange) {
    onChange(pods);
  },
  async stop() {},
});

describe('a collector that starts while a pod fails its readiness probe', () => {
  it('keeps following a pod an earlier collector indexed (written unhealthy), and does not start a new one', async () => {
    const index = createKvIndex({ kind: 'memory' });
    // Left by the collector before this one (a redeploy, a standby taking over), which followed p1.
    await index.upsertPodState({ model: MODEL, podId: 'p1' }, { address: '10.0.0.1:8000', healthy: true });
    const collector = new Collector(testSettings(), {
      index,
      discovery: listed([pod('p1', false), pod('p2', false), pod('p3', true)]),
      log: silentLogger,
      blockSizes: { [MODEL]: BS },
      ownedModels: [MODEL],
    });
    try {
      await collector.start();
      // p2 is not ready and nobody indexed it (a pod still loading its weights): not followed yet.
      expect(collector.worker('p2')).toBeUndefined();
      expect(collector.worker('p1')).toBeDefined();
      await waitFor('p1 written unhealthy', async () =>
        (await index.listPods(MODEL)).some((p) => p.podId === 'p1' && !p.healthy),
      );
      expect((await index.listPods(MODEL)).map((p) => p.podId).sort()).toEqual(['p1', 'p3']);
      expect(collector.health().streams.find((s) => s.pod === 'p1')).toMatchObject({ ready: false });
    } finally {
      await collector.stop();
      await index.close();
    }
  });
});
