import { Agent, createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubeProxyTcp, type KubeProxyTcp } from '../../../bench/lib/live/kube-proxy-tcp.js';

/** GET / through the proxy: the backend's id, or the socket error's code. */
function get(port: number, agent: Agent | false): Promise<string> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: '/', agent }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve(body));
    });
    req.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
    req.end();
  });
}

// The bench:fleet Service: kube-proxy's iptables mode, a random backend per TCP connection, not per request.
describe('kube-proxy stand-in (random backend per TCP connection)', () => {
  const servers: Server[] = [];
  const ports: number[] = [];
  let proxy: KubeProxyTcp;
  let draws = 0;
  beforeAll(async () => {
    for (const id of ['a', 'b']) {
      const s = createServer((_req, res) => res.end(id));
      await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
      servers.push(s);
      ports.push((s.address() as AddressInfo).port);
    }
    // A refused port for the third backend: nothing listens there once the probe server closed.
    const gone = createServer();
    await new Promise<void>((r) => gone.listen(0, '127.0.0.1', r));
    const gonePort = (gone.address() as AddressInfo).port;
    await new Promise<void>((r) => gone.close(() => r()));
    const picks = [0, 0, 0.4, 0.4, 0.9]; // a, a, b, b, the dead one; then round again
    proxy = await startKubeProxyTcp(
      [
        { id: 'a', host: '127.0.0.1', port: ports[0]! },
        { id: 'b', host: '127.0.0.1', port: ports[1]! },
        { id: 'gone', host: '127.0.0.1', port: gonePort },
      ],
      { random: () => picks[draws++ % picks.length]! },
    );
  });
  afterAll(async () => {
    await proxy?.close();
    for (const s of servers) {
      s.closeAllConnections();
      s.close();
    }
  });

  it('keeps a keep-alive connection on the backend it drew; a new connection draws again', async () => {
    const sticky = new Agent({ keepAlive: true, maxSockets: 1 });
    expect([
      await get(proxy.port, sticky),
      await get(proxy.port, sticky),
      await get(proxy.port, sticky),
    ]).toEqual(['a', 'a', 'a']);
    expect(draws).toBe(1);
    sticky.destroy();
    // Without keep-alive every request is a new connection, hence a new draw.
    expect([
      await get(proxy.port, false),
      await get(proxy.port, false),
      await get(proxy.port, false),
    ]).toEqual(['a', 'b', 'b']);
    expect(Object.fromEntries(proxy.connections)).toEqual({ a: 2, b: 2, gone: 0 });
  });

  it('a connection drawn to a dead backend is dropped, not left hanging', async () => {
    expect(await get(proxy.port, false)).toBe('ECONNRESET');
    expect(proxy.connections.get('gone')).toBe(1);
  });
});
