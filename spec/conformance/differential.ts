import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { TIERS, type BlockKey, type LookupResult, type Tier } from '../../src/core/types.js';
import type { ApplyId, IndexOp, KvIndex, PodRef, PodStatePatch } from '../../src/index/index.js';
import { branch, chain } from './chains.js';

/**
 * Differential harness (Dynamo's habit): seeded random command streams drive a reference index (the
 * MemoryKvIndex oracle) and a candidate side by side; every lookup, and the final listings, must be
 * identical. fast-check shrinks a failure to a minimal command list; the seed is printed for replay
 * (set KINF_DIFF_SEED to replay one).
 *
 * The key universe is small on purpose, so that streams collide: three prompts, each with branches
 * sharing its first blocks (system prompts with several conversations), used by several pods of two
 * models (the same pod ids in both), stored twice, removed once, cleared and re-stored.
 *
 * Applies carry ApplyIds of two writers (or none: a fresh id), and `retry` resends a writer's last apply
 * of a pod under the same id, as the collector does after a timeout: the index must skip it if it is
 * still the pod's last apply, and apply it again otherwise, the same way on both sides.
 */

const MODELS = ['m1', 'm2'] as const;
const PODS = ['a', 'b', 'c'] as const;

const CHAINS: BlockKey[][] = (() => {
  const out: BlockKey[][] = [];
  for (const r of [0, 1, 2]) {
    const root = chain(`root ${r}`, 40);
    out.push(root);
    for (const [b, shared] of [6, 25].entries()) out.push(branch(root, shared, `root ${r} branch ${b}`, 20));
  }
  return out;
})();

const WRITERS = ['w1', 'w2'] as const;
type Writer = (typeof WRITERS)[number];

export type Command =
  | { kind: 'apply'; pod: PodRef; ops: IndexOp[]; writer?: Writer }
  | { kind: 'retry'; pod: PodRef; writer: Writer }
  | { kind: 'upsert'; pod: PodRef; patch: PodStatePatch }
  | { kind: 'removePod'; pod: PodRef }
  | { kind: 'lookup'; model: string; keys: BlockKey[] };

const podRef = fc.record({ model: fc.constantFrom(...MODELS), podId: fc.constantFrom(...PODS) });
// GPU dominates, as in vLLM (CPU/STORAGE come from offloading connectors)
const tier: fc.Arbitrary<Tier> = fc.oneof(
  { weight: 4, arbitrary: fc.constant<Tier>('GPU') },
  { weight: 1, arbitrary: fc.constantFrom<Tier>(...TIERS) },
);
const chainIdx = fc.nat({ max: CHAINS.length - 1 });

/** A run of a chain, like one BlockStored event: usually from block 0 or continuing a prefix. */
const run = fc
  .record({
    c: chainIdx,
    from: fc.oneof(fc.constant(0), fc.nat({ max: 45 })),
    len: fc.integer({ min: 1, max: 45 }),
  })
  .map(({ c, from, len }) => CHAINS[c]!.slice(from, from + len))
  .filter((keys) => keys.length > 0);

/** Tail evictions (what vLLM does) and arbitrary single blocks (what it may also do). */
const removal = fc.oneof(
  fc.record({ c: chainIdx, keep: fc.nat({ max: 45 }) }).map(({ c, keep }) => CHAINS[c]!.slice(keep)),
  fc.record({ c: chainIdx, at: fc.nat({ max: 59 }) }).map(({ c, at }) => CHAINS[c]!.slice(at, at + 1)),
);

const op: fc.Arbitrary<IndexOp> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ op: fc.constant('store' as const), keys: run, tier }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('remove' as const), keys: removal, tier }) },
  { weight: 1, arbitrary: fc.constant({ op: 'clear' as const }) },
);

const zeroSafe = (v: number) => (v === 0 ? 0 : v); // -0 is not a state anyone writes
const num = fc.double({ min: 0, max: 1e6, noNaN: true }).map(zeroSafe);
const patch: fc.Arbitrary<PodStatePatch> = fc.record(
  {
    address: fc.constantFrom('10.0.0.1:8000', '10.0.0.2:8000', 'pod.local:8000'),
    healthy: fc.boolean(),
    running: fc.nat({ max: 300 }),
    waiting: fc.nat({ max: 300 }),
    kvUsage: fc.double({ min: 0, max: 1, noNaN: true }).map(zeroSafe),
    kvCapacityTokens: fc.nat({ max: 1_000_000 }),
    meanQueuedPrefillTokens: num,
    calibration: fc.option(
      fc.record({
        overheadMs: num,
        prefillMsPerToken: num,
        attentionMsPerToken2: num,
        cpuLoadMsPerToken: num,
        decodeStepMs: num,
        maxBatchedTokens: fc.integer({ min: 1, max: 65536 }),
      }),
    ),
    lastEventAtMs: fc.nat({ max: 2 ** 42 }),
    lastScrapeAtMs: fc.nat({ max: 2 ** 42 }),
    resyncing: fc.boolean(),
  },
  { requiredKeys: [] },
);

const lookupKeys = fc.oneof(
  fc.record({ c: chainIdx, len: fc.nat({ max: 60 }) }).map(({ c, len }) => CHAINS[c]!.slice(0, len)),
  // a prompt that goes past anything cached
  fc
    .record({ c: chainIdx, tail: fc.integer({ min: 1, max: 9 }) })
    .map(({ c, tail }) => [...CHAINS[c]!, ...chain(`unseen ${c}`, tail, CHAINS[c]!.at(-1))]),
);

export const command: fc.Arbitrary<Command> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record(
      {
        kind: fc.constant('apply' as const),
        pod: podRef,
        ops: fc.array(op, { minLength: 1, maxLength: 4 }),
        writer: fc.constantFrom(...WRITERS),
      },
      { requiredKeys: ['kind', 'pod', 'ops'] },
    ),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('retry' as const),
      pod: podRef,
      writer: fc.constantFrom(...WRITERS),
    }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('upsert' as const), pod: podRef, patch }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('removePod' as const), pod: podRef }) },
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('lookup' as const),
      model: fc.constantFrom(...MODELS),
      keys: lookupKeys,
    }),
  },
);

/** Every pod registered first most of the time, so lookups have something to compare. */
const registerAll: Command[] = MODELS.flatMap((model) =>
  PODS.map((podId) => ({ kind: 'upsert' as const, pod: { model, podId }, patch: {} })),
);

export const commands = fc
  .tuple(fc.boolean(), fc.array(command, { minLength: 1, maxLength: 50, size: 'max' }))
  .map(([reg, cmds]) => (reg ? [...registerAll, ...cmds] : cmds));

/** A command as run: an apply with its id resolved (retries become the apply they repeat). */
type Step =
  | { kind: 'apply'; pod: PodRef; ops: IndexOp[]; id: ApplyId | undefined }
  | Exclude<Command, { kind: 'apply' } | { kind: 'retry' }>;

/** Gives every apply its id (one counter for both writers) and turns retries into their apply. */
function resolver(): (c: Command) => Step | null {
  let seq = 0;
  const last = new Map<string, { ops: IndexOp[]; id: ApplyId }>();
  const at = (pod: PodRef, w: Writer) => `${pod.model}\0${pod.podId}\0${w}`;
  return (c) => {
    if (c.kind === 'apply') {
      if (c.writer === undefined) return { kind: 'apply', pod: c.pod, ops: c.ops, id: undefined };
      const id = { writer: c.writer, seq: ++seq };
      last.set(at(c.pod, c.writer), { ops: c.ops, id });
      return { kind: 'apply', pod: c.pod, ops: c.ops, id };
    }
    if (c.kind === 'retry') {
      const l = last.get(at(c.pod, c.writer));
      return l ? { kind: 'apply', pod: c.pod, ops: l.ops, id: l.id } : null;
    }
    return c;
  };
}

async function exec(ix: KvIndex, c: Step): Promise<LookupResult | null> {
  switch (c.kind) {
    case 'apply':
      await ix.apply(c.pod, c.ops, c.id);
      return null;
    case 'upsert':
      await ix.upsertPodState(c.pod, c.patch);
      return null;
    case 'removePod':
      await ix.removePod(c.pod);
      return null;
    case 'lookup':
      return ix.lookup(c.model, c.keys);
  }
}

export class Divergence extends Error {
  override name = 'Divergence';
}

/** Runs one command list on both indexes; throws Divergence at the first different answer. */
export async function compareOn(
  reference: KvIndex,
  candidate: KvIndex,
  cmds: readonly Command[],
): Promise<void> {
  const check = (what: string, want: unknown, got: unknown) => {
    if (!isDeepStrictEqual(want, got))
      throw new Divergence(
        `${what}\n  reference: ${JSON.stringify(want)}\n  candidate: ${JSON.stringify(got)}`,
      );
  };
  const resolve = resolver();
  for (const [i, cmd] of cmds.entries()) {
    const c = resolve(cmd);
    if (c === null) continue;
    const want = await exec(reference, c);
    const got = await exec(candidate, c);
    check(`command #${i} (${c.kind})`, want, got);
  }
  for (const model of MODELS) {
    check(`final listPods(${model})`, await reference.listPods(model), await candidate.listPods(model));
    for (const [ci, keys] of CHAINS.entries())
      check(
        `final lookup(${model}, chain ${ci})`,
        await reference.lookup(model, keys),
        await candidate.lookup(model, keys),
      );
  }
}

export interface DifferentialOptions {
  numRuns: number;
  seed?: number;
  /** No console line on failure (the self-test expects failures); the error message has the seed anyway. */
  quiet?: boolean;
}

/**
 * The property: for every generated command list, the candidate answers exactly as the reference.
 * `make*` build fresh, empty indexes per run; both are closed after it.
 */
export async function assertSameAsReference(
  makeReference: () => Promise<KvIndex> | KvIndex,
  makeCandidate: () => Promise<KvIndex> | KvIndex,
  opts: DifferentialOptions,
): Promise<void> {
  const envSeed = process.env.KINF_DIFF_SEED;
  const seed =
    opts.seed ?? (envSeed !== undefined ? Number(envSeed) : Date.now() ^ (Math.random() * 2 ** 31));
  const property = fc.asyncProperty(commands, async (cmds) => {
    const [ref, cand] = [await makeReference(), await makeCandidate()];
    try {
      await compareOn(ref, cand, cmds);
    } finally {
      await Promise.all([ref.close(), cand.close()]);
    }
  });
  try {
    await fc.assert(property, { numRuns: opts.numRuns, seed });
  } catch (e) {
    const msg = `differential test failed (replay: KINF_DIFF_SEED=${seed})`;
    if (!opts.quiet) console.error(msg);
    const cause = e instanceof Error && e.cause instanceof Error ? `\n${e.cause.message}` : '';
    throw new Error(`${msg}\n${e instanceof Error ? e.message : String(e)}${cause}`, { cause: e });
  }
}
