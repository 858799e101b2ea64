/**
 * Our narrow, typed view of the kong-pdk object: only the calls the plugin makes, with the types Kong really
 * sends (kong.md §1.3, §2.5): the raw body is a Uint8Array (msgpack bin), a missing header is undefined (nil
 * → no Data), kong.log.serialize() is a JSON string. Each method is ONE RPC round trip to Kong; the access
 * path makes at most four of them (counted in spec/02-integration/plugin/pdk-calls.spec.ts).
 */

/** kong-pdk's bridge: a Proxy where every property path is callable as `kong.<a>.<b>(...)`. */
export type RawKong = { [k: string]: RawKong } & ((...args: unknown[]) => Promise<unknown>);

export type SharedValue = string | number | boolean;

export interface AccessPdk {
  getRawBody(): Promise<Uint8Array | string | undefined>;
  getHeader(name: string): Promise<string | undefined>;
  setTarget(host: string, port: number): Promise<void>;
  /** kong.service.request.set_headers: one round trip for any number of upstream headers. */
  setUpstreamHeaders(headers: Record<string, string>): Promise<void>;
  ctxSharedSet(key: string, value: SharedValue): Promise<void>;
  /** kong.response.exit: Kong never steps the event again, so it is not awaited (and nothing may follow). */
  exit(status: number, body: string, headers: Record<string, string>): void;
}

export interface LogPdk {
  serialize(): Promise<string | undefined>;
  ctxSharedGet(key: string): Promise<unknown>;
}

export function wrapKong(kong: RawKong): AccessPdk & LogPdk {
  const k = kong as unknown as {
    request: { getRawBody(): Promise<unknown>; getHeader(n: string): Promise<unknown> };
    service: {
      setTarget(h: string, p: number): Promise<unknown>;
      request: { setHeaders(h: Record<string, string>): Promise<unknown> };
    };
    response: { exit(s: number, b: string, h: Record<string, string>): Promise<unknown> };
    ctx: { shared: { set(k: string, v: SharedValue): Promise<unknown>; get(k: string): Promise<unknown> } };
    log: { serialize(): Promise<unknown> };
  };
  return {
    async getRawBody() {
      const b = await k.request.getRawBody();
      return b instanceof Uint8Array || typeof b === 'string' ? b : undefined;
    },
    async getHeader(name) {
      const v = await k.request.getHeader(name);
      return typeof v === 'string' ? v : undefined;
    },
    async setTarget(host, port) {
      await k.service.setTarget(host, port);
    },
    async setUpstreamHeaders(headers) {
      await k.service.request.setHeaders(headers);
    },
    async ctxSharedSet(key, value) {
      await k.ctx.shared.set(key, value);
    },
    exit(status, body, headers) {
      void k.response.exit(status, body, headers);
    },
    async serialize() {
      const s = await k.log.serialize();
      return typeof s === 'string' ? s : undefined;
    },
    ctxSharedGet(key) {
      return k.ctx.shared.get(key);
    },
  };
}
