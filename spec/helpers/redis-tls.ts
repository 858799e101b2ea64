// A private TLS-only redis-server with its own CA and client certificates, for the TLS specs.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freeLoopbackPort } from '../../harness/redis-server.js';

/** The name in the server certificate: not 127.0.0.1, so a client must send it (servername) to connect. */
export const TLS_SERVERNAME = 'redis.kinference.test';
export const TLS_USER = 'kinf-router';
export const TLS_PASSWORD = 'tls-s3cret';

/**
 * A private redis-server that speaks only TLS, as an in-cluster or managed Redis does: its own CA, a server
 * certificate for TLS_SERVERNAME only, client certificates required (`tls-auth-clients yes`), the default
 * user off and an ACL user TLS_USER. Files are PEM paths, as operators mount them. Always `stop()` it.
 */
export interface TlsRedis {
  port: number;
  /** rediss://user:password@127.0.0.1:port/0 */
  url: string;
  caFile: string;
  certFile: string;
  keyFile: string;
  /** A CA that signed nothing here: a client trusting only it refuses the server. */
  otherCaFile: string;
  /** A client certificate the server's CA did not sign. */
  strangerCertFile: string;
  strangerKeyFile: string;
  dir: string;
  stop(): Promise<void>;
}

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
}

/** A CA (name.crt, name.key), and `sign` for a certificate of it (with a subjectAltName when given). */
function makeCa(dir: string, name: string): (cert: string, cn: string, san?: string) => void {
  openssl(
    dir,
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', `/CN=${name}`].concat([
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.crt`,
    ]),
  );
  return (cert, cn, san) => {
    openssl(
      dir,
      ['req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${cn}`].concat([
        '-keyout',
        `${cert}.key`,
        '-out',
        `${cert}.csr`,
      ]),
    );
    const ext: string[] = [];
    if (san) {
      writeFileSync(join(dir, `${cert}.ext`), `subjectAltName=${san}\n`);
      ext.push('-extfile', `${cert}.ext`);
    }
    openssl(
      dir,
      ['x509', '-req', '-in', `${cert}.csr`, '-CA', `${name}.crt`, '-CAkey', `${name}.key`].concat([
        '-CAcreateserial',
        '-days',
        '2',
        '-out',
        `${cert}.crt`,
        ...ext,
      ]),
    );
  };
}

async function ready(proc: ChildProcess, t: TlsRedis, timeoutMs: number, log: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`redis-server (TLS) exited: ${log()}`);
    const c = new Redis(t.url, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      connectTimeout: 1000,
      tls: {
        ca: readFileSync(t.caFile),
        cert: readFileSync(t.certFile),
        key: readFileSync(t.keyFile),
        servername: TLS_SERVERNAME,
      },
    });
    c.on('error', () => {});
    try {
      await c.connect();
      if ((await c.ping()) === 'PONG') return;
    } catch {
      // not listening yet
    } finally {
      c.disconnect();
    }
    if (Date.now() > deadline)
      throw new Error(`redis-server (TLS) not ready after ${timeoutMs} ms: ${log()}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export async function startTlsRedis(timeoutMs = 10_000): Promise<TlsRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'kinf-redis-tls-'));
  const sign = makeCa(dir, 'ca');
  sign('server', TLS_SERVERNAME, `DNS:${TLS_SERVERNAME}`);
  sign('client', TLS_USER);
  const signOther = makeCa(dir, 'other-ca');
  signOther('stranger', TLS_USER);
  const port = await freeLoopbackPort();
  let log = '';
  const proc = spawn(
    'redis-server',
    ['--port', '0', '--tls-port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no']
      .concat([
        '--tls-cert-file',
        'server.crt',
        '--tls-key-file',
        'server.key',
        '--tls-ca-cert-file',
        'ca.crt',
      ])
      .concat(['--tls-auth-clients', 'yes', '--user', 'default', 'off'])
      .concat(['--user', TLS_USER, 'on', `>${TLS_PASSWORD}`, '~*', '&*', '+@all']),
    { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  proc.stdout!.on('data', (d: Buffer) => (log += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (log += d.toString()));
  const t: TlsRedis = {
    port,
    url: `rediss://${TLS_USER}:${TLS_PASSWORD}@127.0.0.1:${port}/0`,
    caFile: join(dir, 'ca.crt'),
    certFile: join(dir, 'client.crt'),
    keyFile: join(dir, 'client.key'),
    otherCaFile: join(dir, 'other-ca.crt'),
    strangerCertFile: join(dir, 'stranger.crt'),
    strangerKeyFile: join(dir, 'stranger.key'),
    dir,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null)
        await new Promise<void>((resolve) => {
          proc.once('exit', () => resolve());
          proc.kill('SIGTERM');
        });
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await ready(proc, t, timeoutMs, () => log.slice(-500));
  } catch (e) {
    await t.stop();
    throw e;
  }
  return t;
}
