#!/usr/bin/env node
// Readiness of a Kong node that serves the kinference plugin: exits 0 when the plugin server accepts a
// connection on its socket and (if given) the URL answers 2xx, else 1 with the reason on stderr.
//
//   node /usr/local/lib/kinference/plugin-server-ready.mjs <socket> [<url>]
//
// Why: Kong starts the plugin server from a timer after nginx is up and waits for nothing, and until its
// socket listens every request whose plugin config has no instance yet gets a 500 (StartInstance fails).
// `kong health` and /status/ready say yes long before that. kong/Dockerfile installs this script there;
// docker-compose.yml and deploy/kubernetes/kong/kong-values.yaml use it as the Kong container's probe.
import { connect } from 'node:net';

const TIMEOUT_MS = 2000;
const [socket, url] = process.argv.slice(2);

function fail(reason) {
  process.stderr.write(`not ready: ${reason}\n`);
  process.exit(1);
}

function socketAccepts(path) {
  return new Promise((resolve) => {
    const s = connect(path);
    const done = (error) => {
      clearTimeout(timer);
      s.destroy();
      resolve(error);
    };
    const timer = setTimeout(() => done(`no answer on ${path} within ${TIMEOUT_MS} ms`), TIMEOUT_MS);
    s.once('connect', () => done(null));
    s.once('error', (e) => done(`plugin server socket ${path}: ${e.code ?? e.message}`));
  });
}

if (!socket || process.argv.length > 4) fail('usage: plugin-server-ready.mjs <socket> [<url>]');
const socketError = await socketAccepts(socket);
if (socketError) fail(socketError);
if (url) {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(TIMEOUT_MS) });
    if (!res.ok) fail(`${url} answered ${res.status}`);
  } catch (e) {
    fail(`${url}: ${e instanceof Error ? e.message : String(e)}`);
  }
}
