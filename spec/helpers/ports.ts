// Free ports and waitFor for the specs (re-exported from harness/).
import { freeLoopbackPort } from '../../harness/redis-server.js';

/** A TCP port free on 127.0.0.1 right now (the OS picks it). */
export const freePort = freeLoopbackPort;

export { waitFor } from '../../harness/wait-for.js';
