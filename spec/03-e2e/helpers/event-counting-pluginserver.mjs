// kong-js-pluginserver's own start-up (kong-pdk/bin/kong-js-pluginserver: the real Server and Listener
// classes) plus one probe: every line on stdin is answered with the number of events the server still holds
// (`Server.events`), so a spec can count what Kong's exits leave behind.
// Usage: node event-counting-pluginserver.mjs <plugins dir> <socket path>
import { createRequire } from 'node:module';

// Loaded as CommonJS, as the bin does: the plugin finds server.js in Node's module cache.
const load = createRequire(import.meta.url);
const Server = load('kong-pdk/server.js');
const Listener = load('kong-pdk/listener.js');

const [dir, socket] = process.argv.slice(2);
const logger = {
  debug() {},
  info() {},
  warn: (...a) => process.stderr.write(`${a.join(' ')}\n`),
  error: (...a) => process.stderr.write(`${a.join(' ')}\n`),
};
const ps = new Server(dir, logger);
new Listener(ps, socket).serve();
ps.close();

let pending = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  pending += chunk;
  for (let i = pending.indexOf('\n'); i >= 0; i = pending.indexOf('\n')) {
    pending = pending.slice(i + 1);
    process.stdout.write(`events ${ps.events.size}\n`);
  }
});
process.stdin.on('end', () => process.exit(0));
