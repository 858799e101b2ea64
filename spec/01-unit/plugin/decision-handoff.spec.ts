import { afterAll, describe, expect, it } from 'vitest';
import { runAccess, type PhaseDeps } from '../../../plugins/kinference/access.js';
import { runLog } from '../../../plugins/kinference/log-phase.js';
import { PendingDecisions } from '../../../plugins/kinference/pending.js';
import type { AccessPdk, LogPdk, SharedValue } from '../../../plugins/kinference/pdk.js';
import type { RouteOutcome } from '../../../src/router/index.js';
import { createRouter, defaultResources } from '../../../src/router/index.js';
import { getDecisionTracer, shutdownAllTracers } from '../../../src/telemetry/index.js';
import { freePort } from '../../helpers/ports.js';
import { qwen3RouterConfig } from '../../helpers/qwen3.js';

const MODEL = 'm';
const body = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hello' }], stream: true });

/**
 * Kong's side of one request as the access and log phases see it: the PDK calls answered in memory, and what
 * the log phase's serialize() shows. `traceparentSeen` stands for a later plugin (Kong's opentelemetry plugin
 * injects its own) replacing the traceparent we set upstream.
 */
function kong(o: { failOn?: string; traceparentSeen?: string } = {}): AccessPdk & LogPdk {
  const shared = new Map<string, SharedValue>();
  const call = async (name: string): Promise<void> => {
    if (o.failOn === name) throw new Error(`${name} failed`);
  };
  return {
    getHeaders: async () => ({
      'content-length': [String(body.length)],
      'content-type': ['application/json'],
    }),
    getRawBody: async () => body,
    setTarget: () => call('setTarget'),
    setUpstreamHeaders: () => call('setUpstreamHeaders'),
    setUpstreamBody: () => call('setUpstreamBody'),
    setResponseHeader: () => call('setResponseHeader'),
    ctxSharedSet: async (k, v) => {
      await call('ctxSharedSet');
      shared.set(k, v);
    },
    exit: () => undefined,
    serialize: async () =>
      JSON.stringify({
        request: { headers: o.traceparentSeen ? { traceparent: o.traceparentSeen } : {} },
        response: { status: 200, headers: { 'content-type': 'text/event-stream' } },
        latencies: { proxy: 120 },
        upstream_status: '200',
        tries: [{ ip: '10.0.0.1', port: 8000 }],
      }),
    ctxSharedGet: async (k) => shared.get(k),
    warn: async () => undefined,
  };
}

afterAll(() => shutdownAllTracers(1000));

describe('access → log: every decision that sent a request to a pod is given back', async () => {
  // A tracer whose exports go nowhere: only the decision's handoff matters here.
  const otlp = `http://127.0.0.1:${await freePort()}/v1/traces`;

  function deps(tracing: boolean): PhaseDeps & { observed: RouteOutcome[] } {
    const config = qwen3RouterConfig({
      model_pods: { [MODEL]: ['10.0.0.1:8000'] },
      tokenizer: 'tiktoken:o200k_base',
      chat_template: 'chatml',
    });
    const router = createRouter(config, defaultResources(config));
    const observed: RouteOutcome[] = [];
    return {
      config,
      router: {
        route: (b) => router.route(b),
        observe: (o, t, u) => {
          observed.push(o);
          router.observe(o, t, u);
        },
      },
      tracer: tracing
        ? getDecisionTracer({ endpoint: otlp, serviceName: 't', serviceVersion: '0', sampleRatio: 1 })
        : null,
      pending: new PendingDecisions(),
      now: Date.now,
      observed,
    };
  }

  it.each([false, true])('tracing %s: the log phase finds it', async (tracing) => {
    const d = deps(tracing);
    const k = kong();
    await runAccess(k, d);
    expect(d.pending.size).toBe(1);
    await runLog(k, d);
    expect(d.pending.size).toBe(0);
    expect(d.observed).toHaveLength(1);
  });

  it('tracing on, and another plugin replaced the traceparent sent upstream: found all the same', async () => {
    const d = deps(true);
    const k = kong({ traceparentSeen: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' });
    await runAccess(k, d);
    await runLog(k, d);
    expect(d.pending.size).toBe(0);
    expect(d.observed).toHaveLength(1);
  });

  it.each(['setUpstreamHeaders', 'ctxSharedSet'])(
    'a %s that fails after set_target: released at once (the log phase could not find it)',
    async (failOn) => {
      const d = deps(true);
      const k = kong({ failOn });
      await expect(runAccess(k, d)).rejects.toThrow(`${failOn} failed`);
      expect(d.pending.size).toBe(0);
      expect(d.observed).toHaveLength(1);
      await runLog(k, d); // nothing to find, nothing released twice
      expect(d.observed).toHaveLength(1);
    },
  );
});
