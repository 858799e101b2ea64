/**
 * Patterns for the addresses and endpoints of the fleet YAML, so a bad port is a config error at load time
 * instead of a crash (Node's ERR_SOCKET_BAD_PORT, ZMQ's "Invalid argument") once the collector runs.
 */

/** 1–65535, no leading zero. */
const PORT = '(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})';
/** A host name, an IPv4 address, or an IPv6 address in brackets. */
const HOST = '(?:\\[[0-9A-Fa-f:.]+\\]|[A-Za-z0-9_.-]+)';

/**
 * A pod's `host:port`, which the gateway sends requests to: port 1–65535, or 0 for an emulated pod (the
 * emulator then binds a free port). No IPv6 literal: the plugin's model_pods takes none either.
 */
export const POD_ADDRESS_PATTERN = `^[^:\\s]+:(?:0|${PORT})$`;

/** `[host]:port` to listen on: port 0 picks a free one; no host means every interface. */
export const LISTEN_PATTERN = `^${HOST}?:(?:0|${PORT})$`;

/** A ZMQ endpoint the collector connects to: tcp://host:port (port 1–65535), ipc://path or inproc://name. */
export const ZMQ_ENDPOINT_PATTERN = `^(?:tcp://${HOST}:${PORT}|ipc://\\S+|inproc://\\S+)$`;
