// One live cell through N Kong stand-in nodes, the client dealing its requests over them in turn.
import { existsSync, readFileSync } from 'node:fs';
import type { RequestRecord } from '../types.js';
import { driveLoad, type LoadRunResult } from './drive-load.js';
import { streamChat } from './http-client.js';
import type { LiveCellInput } from './run-live-cell.js';
import type { LiveStack } from './stack.js';

/** What the chosen node's plugin said about one request (its expose_headers, from the shared access log). */
export interface NodeDecision {
  /** The node the client sent it to (index into stack.gateways). */
  node: number;
  /** The pod Kong proxied it to (file-log's last try). */
  pod: string;
  /** x-kinference-fallback: why it was routed on load alone; absent when routed cache-aware. */
  fallback?: string;
  /** x-kinference-cached-tokens: the prefix the router expected the pod to hold. */
  predictedCached?: number;
  /** x-kinference-predicted-ttft-ms. */
  predictedTtftMs?: number;
}

export interface SpreadCellResult extends LoadRunResult {
  /** Per record (same order as `records`), what the node decided; null when the access log has no entry. */
  decisions: (NodeDecision | null)[];
}

const header = (h: Record<string, unknown>, name: string): string | undefined => {
  const v = h[name];
  return typeof v === 'string' ? v : Array.isArray(v) ? String(v[0]) : undefined;
};

/** The access log's entries by Kong request id, waiting up to `waitMs` for the ids asked about. */
async function accessEntries(
  stack: Pick<LiveStack, 'accessLog' | 'pods'>,
  ids: readonly string[],
  waitMs = 10_000,
): Promise<Map<string, Omit<NodeDecision, 'node'>>> {
  const byAddr = new Map(stack.pods.map((p) => [`${p.host}:${p.port}`, p.id]));
  const deadline = Date.now() + waitMs;
  for (;;) {
    const out = new Map<string, Omit<NodeDecision, 'node'>>();
    const text = existsSync(stack.accessLog) ? readFileSync(stack.accessLog, 'utf8') : '';
    for (const line of text.split('\n')) {
      if (!line) continue;
      const e = JSON.parse(line) as {
        request: { id: string; headers?: Record<string, unknown> };
        tries?: { ip: string; port: number }[];
      };
      const last = e.tries?.at(-1);
      const h = e.request.headers ?? {};
      const fallback = header(h, 'x-kinference-fallback');
      const cached = header(h, 'x-kinference-cached-tokens');
      const ttft = header(h, 'x-kinference-predicted-ttft-ms');
      out.set(e.request.id, {
        pod: (last && byAddr.get(`${last.ip}:${last.port}`)) ?? '',
        ...(fallback ? { fallback } : {}),
        ...(cached !== undefined ? { predictedCached: Number(cached) } : {}),
        ...(ttft !== undefined ? { predictedTtftMs: Number(ttft) } : {}),
      });
    }
    if (ids.every((id) => out.has(id)) || Date.now() > deadline) return out;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * Drives one profile (as the DES client does, drive-load.ts) through the stack's Kong nodes: request k goes
 * to node k mod N, as the discrete-event benchmark's `--gateways N` deals them, so consecutive turns of one
 * conversation, and the requests of one shared prefix, reach different nodes and their plugin servers.
 */
export async function runSpreadCell(
  o: LiveCellInput & {
    /** Use the stack's first `nodes` Kong nodes (default all). */
    nodes?: number;
  },
): Promise<SpreadCellResult> {
  const nodes = o.stack.gateways.slice(0, o.nodes ?? o.stack.gateways.length);
  const nodeOf = new Map<RequestRecord, number>();
  const idOf = new Map<RequestRecord, string>();
  let sent = 0;
  const result = await driveLoad({
    profile: o.profile,
    factory: o.factory,
    model: o.model.model,
    seed: o.seed,
    trial: o.trial,
    timeScale: o.timeScale,
    send: async ({ rec, body }) => {
      const node = sent++ % nodes.length;
      const gw = nodes[node]!;
      nodeOf.set(rec, node);
      rec.pod = 'gateway';
      const t = await streamChat(gw.host, gw.port, body);
      if (t.requestId !== null) idOf.set(rec, t.requestId);
      return t;
    },
  });
  const entries = await accessEntries(o.stack, [...idOf.values()]);
  const decisions = result.records.map((rec): NodeDecision | null => {
    const id = idOf.get(rec);
    const e = id === undefined ? undefined : entries.get(id);
    if (!e) return null;
    if (e.pod) rec.pod = e.pod;
    return { node: nodeOf.get(rec)!, ...e };
  });
  return { ...result, decisions };
}
