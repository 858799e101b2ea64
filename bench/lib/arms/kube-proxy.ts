// The kube-proxy arm: a random pod per keep-alive TCP connection, as the published study's service arm ran.
import type { Rng } from '../rng.js';
import type { Arm, ArmDecision, ArmRequest } from './types.js';

/** uvicorn's `timeout_keep_alive` (vLLM's API server) and httpx's `keepalive_expiry` are both 5 s. */
export const KEEPALIVE_MS = 5000;

interface Connection {
  podId: string;
  /** When the last response on it ended; null while a request is on it. */
  idleSinceMs: number | null;
}

/**
 * kube-proxy behind a keep-alive client, as the published study's "service" arm ran: kube-proxy (iptables
 * mode) picks a uniformly random endpoint per TCP connection, and GuideLLM's httpx client (one pool per
 * worker process, HTTP/1.1, unlimited connections, keep-alive 5 s) sends each request on the oldest
 * idle connection that has not expired (httpcore `_assign_requests_to_connections`), else on a new
 * connection. So a client's next request stays on the pod of a connection it released less than 5 s ago.
 */
export function kubeProxyArm(rng: Rng, keepaliveMs = KEEPALIVE_MS): Arm {
  const pools = new Map<number, Connection[]>();
  return {
    name: 'random',
    choose: (req, pods, nowMs): ArmDecision => {
      let pool = pools.get(req.client);
      if (!pool) pools.set(req.client, (pool = []));
      // Expired idle connections are closed first (client or server side, whichever times out).
      for (let i = pool.length - 1; i >= 0; i--) {
        const c = pool[i]!;
        if (c.idleSinceMs !== null && nowMs - c.idleSinceMs > keepaliveMs) pool.splice(i, 1);
      }
      let conn = pool.find((c) => c.idleSinceMs !== null);
      if (!conn || !pods.some((p) => p.id === conn!.podId)) {
        conn = { podId: rng.pick(pods).id, idleSinceMs: null };
        pool.push(conn);
      }
      conn.idleSinceMs = null;
      return { podId: conn.podId, token: conn };
    },
    onComplete: (decision, _req, nowMs) => {
      const conn = decision.token as Connection | undefined;
      if (conn) conn.idleSinceMs = nowMs;
    },
  };
}

/** A random arm (per connection or per request) driven by a real client's workers, outside the DES. */
export interface ClientRandomRouter {
  /** The pod for client worker `client`'s next request, on the model's clock. */
  choose(client: number, nowMs: number): ArmDecision;
  /** That request's response ended: its connection goes back to the worker's pool. */
  release(decision: ArmDecision, client: number, nowMs: number): void;
}

export function clientRandomRouter(arm: Arm, podIds: readonly string[]): ClientRandomRouter {
  const views = podIds.map((id) => ({ id, inFlight: 0, waiting: null, kvUsage: null }));
  const req = (client: number): ArmRequest => ({
    key: '',
    body: '',
    promptTokenIds: [],
    firstMessageText: '',
    client,
  });
  return {
    choose: (client, nowMs) => arm.choose(req(client), views, nowMs) as ArmDecision,
    release: (decision, client, nowMs) => arm.onComplete?.(decision, req(client), nowMs, 0, 0),
  };
}
