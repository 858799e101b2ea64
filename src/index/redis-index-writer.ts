// IndexWriter on Redis: apply, upsertPodState and removePod as fenced, exactly-once script calls.
import { KinferenceError } from '../core/errors.js';
import { nextApplyId, type ApplyRecord } from './apply-id.js';
import type { ApplyId, IndexLossReason, IndexOp, IndexWriter, PodRef } from './kv-index.js';
import { APPLY_REPLY } from './lua/apply.js';
import { notLeaseHolderReply } from './lua/fence.js';
import type { PodStatePatch } from './pod-state-codec.js';
import type { RedisIndexContext } from './redis-index-context.js';
import { SCRIPTS } from './redis-scripts.js';
import { WriteLossWatch } from './redis-write-loss.js';
import { applyCalls, removePodCall, upsertPodCall } from './script-args.js';
import { LeaseLostError } from './writer-lease.js';

const LOSS_REPLY: Record<number, IndexLossReason> = {
  [APPLY_REPLY.missing]: 'missing',
  [APPLY_REPLY.rolledBack]: 'rolled_back',
  [APPLY_REPLY.overwritten]: 'overwritten',
};

/**
 * IndexWriter on Redis: one script call per write (apply: one per maxKeysPerCall keys), each fenced when
 * the settings carry a fence. Writes are exactly once (an ApplyId per apply, checked by the script) and
 * their loss is detected (`watch`, redis-write-loss.ts): the apply script also compares the pod's apply
 * record with the last one this index saw confirmed.
 */
export class RedisIndexWriter implements IndexWriter {
  readonly watch: WriteLossWatch;

  constructor(private readonly ctx: RedisIndexContext) {
    this.watch = new WriteLossWatch(ctx, (base, model, podId) => this.#removePod(base, model, podId));
  }

  /**
   * Without `id`, the apply gets a fresh one (nextApplyId): it cannot be retried as the same apply, but
   * its loss is still detected.
   */
  async apply(pod: PodRef, ops: readonly IndexOp[], id: ApplyId = nextApplyId()): Promise<void> {
    const { ctx } = this;
    const { blockTtlSeconds, maxKeysPerCall, fence, commandTimeoutMs } = ctx.settings;
    const base = ctx.base(pod.model);
    const w = this.watch.pod(base, pod);
    const { floor, losses } = w;
    const calls = applyCalls(base, pod.podId, blockTtlSeconds, ops, maxKeysPerCall, id, floor, fence);
    if (calls.length === 0) return;
    this.watch.forgetRemoval(base, pod.podId);
    // In order, one after the other: a NOSCRIPT retry must not let a later call overtake an earlier one.
    // Past the deadline nothing more is sent; the caller's retry resends every part, and the script skips
    // those that ran.
    const reply = await ctx.run('apply', commandTimeoutMs * calls.length, async (expired) => {
      for (const call of calls) {
        if (expired()) break;
        const r = await SCRIPTS.apply.run(ctx.conn.client, call);
        const holder = notLeaseHolderReply(r);
        if (holder !== null) return { holder };
        if (typeof r === 'number' && r < APPLY_REPLY.duplicate) return r;
      }
      return 0;
    });
    // Not a loss: the writes are not gone, this process may no longer make them. The floor stays as it is.
    if (typeof reply !== 'number')
      throw new LeaseLostError(pod.model, reply.holder, `apply to pod ${pod.podId}`);
    const lost = LOSS_REPLY[reply];
    if (lost !== undefined) {
      this.watch.lose(w, losses, lost);
      throw new KinferenceError(
        'KINF_ERR_REDIS',
        `apply: Redis no longer holds the writes to pod ${pod.podId} (${lost}); nothing written, the pod must be rebuilt`,
      );
    }
    const done: ApplyRecord = { writer: id.writer, seq: id.seq, part: calls.length };
    this.watch.confirm(w, losses, done);
  }

  async upsertPodState(pod: PodRef, state: PodStatePatch): Promise<void> {
    const base = this.ctx.base(pod.model);
    this.watch.forgetRemoval(base, pod.podId); // before sending: a check in flight must not remove it again
    const r = await this.ctx.script(
      'upsertPodState',
      SCRIPTS.upsertPod,
      upsertPodCall(base, pod.podId, state, this.ctx.settings.fence),
    );
    this.ctx.fenceCheck(r, pod.model, `upsertPodState of pod ${pod.podId}`);
  }

  async removePod(pod: PodRef): Promise<void> {
    const base = this.ctx.base(pod.model);
    await this.#removePod(base, pod.model, pod.podId);
    this.watch.removed(base, pod);
  }

  onWritesLost(pod: PodRef, listener: (reason: IndexLossReason) => void): () => void {
    const w = this.watch.pod(this.ctx.base(pod.model), pod);
    w.listeners.add(listener);
    return () => {
      w.listeners.delete(listener);
    };
  }

  async #removePod(base: string, model: string, podId: string): Promise<void> {
    const call = removePodCall(base, podId, this.ctx.settings.fence);
    const r = await this.ctx.script('removePod', SCRIPTS.removePod, call);
    this.ctx.fenceCheck(r, model, `removePod of pod ${podId}`);
  }
}
