import type { V1EndpointSlice } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { podsFromEndpointSlices } from '../../../src/collector/discovery/endpoint-slices.js';
import { streamsOf } from '../../../src/collector/pods.js';

const K8S = {
  namespace: 'llm',
  service: 'vllm',
  model: 'Qwen/Qwen3-8B',
  http_port: 8000,
  kv_events_port: 5557,
  kv_events_replay_port: 5558,
  metrics_path: '/metrics',
  data_parallel_size: 1,
  not_ready_grace_ms: 300_000,
};

function slice(name: string, endpoints: V1EndpointSlice['endpoints'], addressType = 'IPv4'): V1EndpointSlice {
  return {
    addressType,
    metadata: { name, namespace: 'llm', labels: { 'kubernetes.io/service-name': 'vllm' } },
    endpoints,
  };
}

describe('podsFromEndpointSlices', () => {
  it('maps endpoints to pods with ports from the config, once each, sorted; terminating ones are left out', () => {
    const pods = podsFromEndpointSlices(
      [
        slice('vllm-a', [
          {
            addresses: ['10.1.0.9'],
            conditions: { ready: true },
            targetRef: { kind: 'Pod', name: 'vllm-1' },
          },
          { addresses: ['10.1.0.8'], targetRef: { kind: 'Pod', name: 'vllm-0' } }, // ready unset = ready
          {
            addresses: ['10.1.0.7'],
            conditions: { ready: false, terminating: true },
            targetRef: { kind: 'Pod', name: 'vllm-old' },
          },
          // publishNotReadyAddresses: ready is always true; terminating / serving still tell.
          {
            addresses: ['10.1.0.6'],
            conditions: { ready: true, serving: true, terminating: true },
            targetRef: { kind: 'Pod', name: 'vllm-leaving' },
          },
          {
            addresses: ['10.1.0.5'],
            conditions: { ready: true, serving: false, terminating: false },
            targetRef: { kind: 'Pod', name: 'vllm-starting' },
          },
        ]),
        slice(
          'vllm-b',
          [
            { addresses: ['10.1.0.9'], targetRef: { kind: 'Pod', name: 'vllm-1' } },
            { addresses: ['fd00::5'] },
          ],
          'IPv6',
        ),
        slice('vllm-fqdn', [{ addresses: ['x.example'] }], 'FQDN'),
      ],
      K8S,
    );
    expect(pods).toEqual([
      {
        id: 'vllm-0',
        model: 'Qwen/Qwen3-8B',
        address: '10.1.0.8:8000',
        kvEvents: 'tcp://10.1.0.8:5557',
        kvEventsReplay: 'tcp://10.1.0.8:5558',
        topic: '',
        metrics: 'http://10.1.0.8:8000/metrics',
        dataParallelSize: 1,
      },
      expect.objectContaining({ id: 'vllm-1', address: '10.1.0.9:8000' }),
      expect.objectContaining({
        id: 'vllm-fd00--5',
        address: '[fd00::5]:8000',
        kvEvents: 'tcp://[fd00::5]:5557',
      }),
      // Not serving (the probe fails) but not terminating: listed, not ready.
      expect.objectContaining({ id: 'vllm-starting', address: '10.1.0.5:8000', ready: false }),
    ]);
  });

  it('lists a pod that fails its readiness probe as not ready; a slice that says ready wins', () => {
    const notReady = { ready: false, serving: false, terminating: false };
    const pods = podsFromEndpointSlices(
      [
        slice('vllm-a', [
          { addresses: ['10.1.0.1'], conditions: notReady, targetRef: { kind: 'Pod', name: 'vllm-0' } },
          {
            addresses: ['10.1.0.2'],
            conditions: { ready: false },
            targetRef: { kind: 'Pod', name: 'vllm-1' },
          },
          { addresses: ['10.1.0.3'], conditions: notReady, targetRef: { kind: 'Pod', name: 'vllm-2' } },
        ]),
        // During an update the same pod may sit in two slices: ready in one of them means ready.
        slice('vllm-b', [
          {
            addresses: ['10.1.0.1'],
            conditions: { ready: true },
            targetRef: { kind: 'Pod', name: 'vllm-0' },
          },
          { addresses: ['10.1.0.3'], conditions: notReady, targetRef: { kind: 'Pod', name: 'vllm-2' } },
        ]),
      ],
      K8S,
    );
    expect(pods.map((p) => [p.id, p.ready ?? true])).toEqual([
      ['vllm-0', true],
      ['vllm-1', false],
      ['vllm-2', false],
    ]);
    expect(pods[0]).not.toHaveProperty('ready');
  });

  it('gives every pod the Service-wide data_parallel_size: one stream per rank on port + r', () => {
    const [pod] = podsFromEndpointSlices(
      [slice('vllm-a', [{ addresses: ['10.1.0.1'], targetRef: { kind: 'Pod', name: 'vllm-0' } }])],
      { ...K8S, kv_events_replay_port: 5567, data_parallel_size: 2 },
    );
    expect(streamsOf(pod!).map((st) => [st.podId, st.rank, st.kvEvents, st.kvEventsReplay])).toEqual([
      ['vllm-0@dp0', 0, 'tcp://10.1.0.1:5557', 'tcp://10.1.0.1:5567'],
      ['vllm-0@dp1', 1, 'tcp://10.1.0.1:5558', 'tcp://10.1.0.1:5568'],
    ]);
  });

  it('takes the IPv4 address of a dual-stack pod whatever order the slices come in', () => {
    const v6 = slice(
      'vllm-a6',
      [{ addresses: ['fd00::1'], targetRef: { kind: 'Pod', name: 'vllm-0' } }],
      'IPv6',
    );
    const v4 = slice('vllm-z4', [{ addresses: ['10.0.0.1'], targetRef: { kind: 'Pod', name: 'vllm-0' } }]);
    for (const order of [
      [v6, v4],
      [v4, v6],
    ])
      expect(podsFromEndpointSlices(order, K8S).map((p) => p.address)).toEqual(['10.0.0.1:8000']);
  });

  it('keeps the IPv4 address of a dual-stack pod whose IPv4 slice says not ready and IPv6 slice ready', () => {
    const v4 = slice('vllm-z4', [
      { addresses: ['10.0.0.1'], conditions: { ready: false }, targetRef: { kind: 'Pod', name: 'vllm-0' } },
    ]);
    const v6 = slice(
      'vllm-a6',
      [{ addresses: ['fd00::1'], targetRef: { kind: 'Pod', name: 'vllm-0' } }],
      'IPv6',
    );
    const [pod] = podsFromEndpointSlices([v6, v4], K8S);
    expect(pod).toMatchObject({ address: '10.0.0.1:8000' });
    expect(pod).not.toHaveProperty('ready');
  });
});
