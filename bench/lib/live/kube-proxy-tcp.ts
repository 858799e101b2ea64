// A Kubernetes Service as kube-proxy's iptables mode makes it: a random backend per TCP connection.
import { connect, createServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface TcpBackend {
  id: string;
  host: string;
  port: number;
}

export interface KubeProxyTcp {
  host: string;
  port: number;
  /** Connections accepted per backend id. */
  connections: Map<string, number>;
  close(): Promise<void>;
}

/**
 * A Kubernetes Service as kube-proxy's iptables mode makes it: each new TCP connection is sent to a backend
 * picked at random, and every request on that connection goes where it went (keep-alive makes a client sticky).
 * A backend that refuses drops the client's connection, as a DNAT to a dead endpoint does.
 */
export async function startKubeProxyTcp(
  backends: readonly TcpBackend[],
  o: { host?: string; port?: number; random?: () => number } = {},
): Promise<KubeProxyTcp> {
  if (backends.length === 0) throw new Error('kube-proxy stand-in: no backends');
  const random = o.random ?? Math.random;
  const connections = new Map<string, number>(backends.map((b) => [b.id, 0]));
  const open = new Set<Socket>();
  const server = createServer((client) => {
    const b = backends[Math.floor(random() * backends.length)]!;
    connections.set(b.id, connections.get(b.id)! + 1);
    const upstream = connect({ host: b.host, port: b.port });
    for (const s of [client, upstream]) {
      open.add(s);
      s.on('close', () => open.delete(s));
    }
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port ?? 0, o.host ?? '127.0.0.1', resolve);
  });
  const addr = server.address() as AddressInfo;
  return {
    host: addr.address,
    port: addr.port,
    connections,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}
