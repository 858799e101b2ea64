// The collector's HTTP server: GET /metrics and GET /healthz.
import { createServer, type Server } from 'node:http';
import { listenError } from '../util/listen-failure.js';
import type { Collector } from './collector.js';

export interface CollectorServer {
  /** host:port actually bound (port 0 in the config picks a free one). */
  address: string;
  close(): Promise<void>;
}

function splitListen(listen: string): { host: string; port: number } {
  const i = listen.lastIndexOf(':');
  const host = listen.slice(0, i).replace(/^\[|\]$/g, '') || '0.0.0.0';
  return { host, port: Number(listen.slice(i + 1)) };
}

/** GET /metrics (Prometheus text, the collector's own registry) and GET /healthz (JSON, 503 when not ok). */
export async function startCollectorServer(collector: Collector, listen: string): Promise<CollectorServer> {
  const reg = collector.metrics.registry;
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (path === '/metrics') {
      reg.metrics().then(
        (text) => res.writeHead(200, { 'content-type': reg.contentType }).end(text),
        (err: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(String(err)),
      );
    } else if (path === '/healthz') {
      const h = collector.health();
      res.writeHead(h.ok ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify(h));
    } else res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
  });
  const { host, port } = splitListen(listen);
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(listenError(`collector.listen ${listen}`, err)));
    server.listen(port, host, () => resolve());
  });
  const addr = server.address();
  const bound = addr !== null && typeof addr === 'object' ? `${host}:${addr.port}` : listen;
  return {
    address: bound,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
