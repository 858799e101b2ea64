// Turns listen/bind failures an operator can fix (port in use, bad address) into one-line config errors.
import { KinferenceError } from '../core/errors.js';

/** Listen/bind failures an operator fixes in the config or on the command line, in their words. */
const LISTEN_FAILURES: Record<string, string> = {
  EADDRINUSE:
    'address already in use: another process listens there (pick another port, or 0 for a free one)',
  EACCES: 'permission denied (ports below 1024 need privileges)',
  EADDRNOTAVAIL: 'address not available: no interface of this machine has that address',
  ENOTFOUND: 'host name not found',
  EAI_AGAIN: 'host name not resolvable right now',
};

/** Why a listen or bind failed, for the errors above (Node's net and zeromq both set `code`). */
export function listenFailureReason(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? LISTEN_FAILURES[code] : undefined;
}

/**
 * The address a failed listen or bind names: Node sets `address` and `port`, zeromq the endpoint as
 * `address`; undefined when the error carries neither.
 */
export function failedListenAddress(err: unknown): string | undefined {
  const e = err as { address?: unknown; port?: unknown } | null;
  if (typeof e?.address !== 'string') return undefined;
  if (typeof e.port !== 'number') return e.address;
  return e.address.includes(':') ? `[${e.address}]:${e.port}` : `${e.address}:${e.port}`;
}

/**
 * A listen failure the operator can fix becomes a config error (`kinference: <where>: <why>`, exit 2, no
 * stack trace); anything else is returned unchanged.
 */
export function listenError(where: string, err: unknown): unknown {
  const why = listenFailureReason(err);
  return why ? new KinferenceError('KINF_ERR_CONFIG', `${where}: ${why}`, { cause: err }) : err;
}
