// Kong's bridge loop: HandleEvent, then every PDK call the plugin makes answered as Kong would.
import { MsgpackRpcClient, RpcError } from './rpc-client.js';

/**
 * Kong's bridge loop (mp_rpc.lua bridge_loop, kong.md §2.3): HandleEvent, then for every PDK call the plugin
 * asks for, run it on Kong's side and answer with the Step method Kong would pick, until the plugin says
 * "ret". Rules kept exactly: only the first Lua return value crosses (nil → no `Data` key); raw bodies go as
 * msgpack bin; header/query maps go through fix_mmap via StepMultiMap; kong.response.exit/error end the
 * event with no further Step; a Lua error inside a PDK function abandons the event (Kong answers 500).
 */

/** What a PDK function did on Kong's side. */
export type PdkOutcome =
  | { kind: 'value'; value: unknown }
  | { kind: 'raw'; value: Uint8Array }
  | { kind: 'multimap'; value: Record<string, string | (string | true)[] | true> }
  | { kind: 'exit'; status: number; body: Uint8Array | null; headers: Record<string, string[]> }
  | { kind: 'error'; message: string }
  /** Not something Kong does today (it never sends StepError); tests use it to make a PDK call reject. */
  | { kind: 'step_error'; message: string };

export interface PdkHandler {
  call(method: string, args: unknown[]): PdkOutcome;
}

export interface PdkStep {
  method: string;
  args: unknown[];
  /** RPC round trip that answered this call (the Step carrying its result), ms. */
  stepMs: number;
}

export interface EventResult {
  /** ret: handler finished; exit: kong.response.exit/error; pdk_error: a PDK function raised (Kong → 500). */
  end: 'ret' | 'exit' | 'pdk_error';
  steps: PdkStep[];
  handleEventMs: number;
  totalMs: number;
  exit?: { status: number; body: Uint8Array | null; headers: Record<string, string[]> };
  error?: string;
}

/** Kong's get_step_method table (mp_rpc.lua). */
const STEP_METHOD: Record<string, string> = {
  'kong.client.get_credential': 'plugin.StepCredential',
  'kong.client.load_consumer': 'plugin.StepConsumer',
  'kong.client.get_consumer': 'plugin.StepConsumer',
  'kong.client.authenticate': 'plugin.StepCredential',
  'kong.node.get_memory_stats': 'plugin.StepMemoryStats',
  'kong.router.get_route': 'plugin.StepRoute',
  'kong.router.get_service': 'plugin.StepService',
  'kong.request.get_query': 'plugin.StepMultiMap',
  'kong.request.get_headers': 'plugin.StepMultiMap',
  'kong.response.get_headers': 'plugin.StepMultiMap',
  'kong.service.response.get_headers': 'plugin.StepMultiMap',
};

export function stepMethodFor(pdkMethod: string): string {
  return STEP_METHOD[pdkMethod] ?? 'plugin.Step';
}

/** fix_mmap: every value an array (`"v"` → `["v"]`, `true` → `[]`); an empty table is an empty map. */
export function fixMultiMap(
  m: Record<string, string | (string | true)[] | true>,
): Record<string, (string | true)[]> {
  const out: Record<string, (string | true)[]> = {};
  for (const [k, v] of Object.entries(m)) out[k] = v === true ? [] : typeof v === 'string' ? [v] : v;
  return out;
}

/**
 * Lua tables are packed by lua-MessagePack: an empty table becomes an empty ARRAY, `nil` inside a table
 * disappears. Mirror that for values Kong hands back (ctx.shared.get of a stored table, route/service).
 */
export function luaShape(v: unknown): unknown {
  if (v === null || v === undefined) return undefined;
  if (v instanceof Uint8Array) return v;
  if (Array.isArray(v)) return v.map((x) => luaShape(x) ?? null);
  if (typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>).filter(
      ([, x]) => x !== null && x !== undefined,
    );
    if (entries.length === 0) return [];
    return Object.fromEntries(entries.map(([k, x]) => [k, luaShape(x)]));
  }
  return v;
}

interface StepIn {
  Data: 'ret' | { Method: string; Args?: unknown[] };
  EventId: number;
}

function asStepIn(v: unknown): StepIn {
  if (typeof v !== 'object' || v === null)
    throw new RpcError('transport', `bad step reply ${JSON.stringify(v)}`);
  const s = v as { Data?: unknown; EventId?: unknown };
  if (typeof s.EventId !== 'number') throw new RpcError('transport', `step reply without EventId`);
  if (s.Data === 'ret') return s as StepIn;
  const d = s.Data as { Method?: unknown; Args?: unknown } | undefined;
  if (!d || typeof d.Method !== 'string')
    throw new RpcError('transport', `bad step Data ${JSON.stringify(s.Data)}`);
  if (d.Args !== undefined && d.Args !== null && !Array.isArray(d.Args))
    throw new RpcError('transport', `bad step Args for ${d.Method}`);
  return s as StepIn;
}

/**
 * Runs one phase of one plugin instance. Throws RpcError on transport or remote errors (the caller applies
 * Kong's policy: "no plugin instance" → reset and retry; anything else → log and fail open).
 */
export async function runEvent(
  rpc: MsgpackRpcClient,
  instanceId: number,
  phase: string,
  pdk: PdkHandler,
): Promise<EventResult> {
  const t0 = performance.now();
  let stepIn = asStepIn(await rpc.call('plugin.HandleEvent', { InstanceId: instanceId, EventName: phase }));
  const handleEventMs = performance.now() - t0;
  const eventId = stepIn.EventId;
  const steps: PdkStep[] = [];
  const done = (r: Omit<EventResult, 'steps' | 'handleEventMs' | 'totalMs'>): EventResult => ({
    ...r,
    steps,
    handleEventMs,
    totalMs: performance.now() - t0,
  });

  while (stepIn.Data !== 'ret') {
    const { Method: method } = stepIn.Data;
    const args = stepIn.Data.Args ?? [];
    const out = pdk.call(method, args);
    if (out.kind === 'exit') {
      steps.push({ method, args, stepMs: 0 });
      return done({ end: 'exit', exit: { status: out.status, body: out.body, headers: out.headers } });
    }
    if (out.kind === 'error') {
      steps.push({ method, args, stepMs: 0 });
      return done({ end: 'pdk_error', error: `${method}: ${out.message}` });
    }
    if (out.kind === 'step_error') {
      const ts = performance.now();
      stepIn = asStepIn(await rpc.call('plugin.StepError', { EventId: eventId, Data: out.message }));
      steps.push({ method, args, stepMs: performance.now() - ts });
      continue;
    }
    let data: unknown;
    if (out.kind === 'raw') data = out.value;
    else if (out.kind === 'multimap') data = fixMultiMap(out.value);
    else data = luaShape(out.value);
    const params: { EventId: number; Data?: unknown } = { EventId: eventId };
    if (data !== undefined) params.Data = data;
    const ts = performance.now();
    stepIn = asStepIn(await rpc.call(stepMethodFor(method), params));
    steps.push({ method, args, stepMs: performance.now() - ts });
  }
  return done({ end: 'ret' });
}
