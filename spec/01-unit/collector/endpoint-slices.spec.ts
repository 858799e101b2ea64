import type { V1EndpointSlice } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { podsFromEndpointSlices } from '../../../src/collector/discovery/endpoint-slices.js';

const K8S = {
  namespace: 'llm',
  service: 'vllm',
  model: 'Qwen/Qwen3-8B',
  http_port: 8000,
  kv_events_port: 5557,
  kv_events_replay_port: 5558,
  metrics_path: '/metrics',
};

function slice(name: string, endpoints: V1EndpointSlice['endpoints'], addressType = 'IPv4'): V1EndpointSlice {
  return {
    addressType,
    metadata: { name, namespace: 'llm', labels: { 'kubernetes.io/service-name': 'vllm' } },
    endpoints,
  };
}

describe('podsFromEndpointSlices', () => {
  it('maps ready endpoints to pods with ports from the config, once each, sorted', () => {
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
    ]);
  });
});
