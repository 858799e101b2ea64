// HandoffStore on Redis: saves and takes collector handoff records in pieces (lua/handoff.ts).
import { randomBytes } from 'node:crypto';
import { KinferenceError } from '../core/errors.js';
import { formatApplyRecord, type ApplyRecord } from './apply-id.js';
import type { HandoffStore, HandoffTake, PodRef } from './kv-index.js';
import type { RedisIndexContext } from './redis-index-context.js';
import { handoffTransferKey } from './redis-keys.js';
import { SCRIPTS } from './redis-scripts.js';
import { handoffCall } from './script-args.js';

/** Handoff records move in pieces of this size (see saveHandoff). */
const HANDOFF_CHUNK_BYTES = 1 << 20;
/** A record in transfer outlives a client that dies midway by at most this long. */
const HANDOFF_TRANSFER_TTL_MS = 60_000;

/**
 * HandoffStore on Redis (lua/handoff.ts). `confirmed` is the writer's last apply record Redis confirmed
 * for a pod (redis-write-loss.ts): a record is saved as describing the pod as of that write.
 */
export class RedisHandoffStore implements HandoffStore {
  constructor(
    private readonly ctx: RedisIndexContext,
    private readonly confirmed: (base: string, podId: string) => ApplyRecord | null,
  ) {}

  /**
   * The record goes in 1 MB pieces to a key of this call's own, and the script only stamps and renames it:
   * no command copies more than a piece, so a large handoff never stalls the routers' lookups (lua/handoff.ts).
   * The record is taken to describe the pod as of this index's last confirmed write to it: one that landed
   * after (an apply still in flight when the record was taken, another writer) makes the script refuse it.
   */
  async saveHandoff(pod: PodRef, record: string): Promise<boolean> {
    const { ctx } = this;
    const base = ctx.base(pod.model);
    const floor = this.confirmed(base, pod.podId);
    const expected = floor === null ? '' : formatApplyRecord(floor);
    const transfer = handoffTransferKey(base, randomBytes(8).toString('hex'));
    const bytes = Buffer.from(record, 'utf8');
    try {
      for (let at = 0; at === 0 || at < bytes.length; at += HANDOFF_CHUNK_BYTES) {
        const piece = bytes.subarray(at, at + HANDOFF_CHUNK_BYTES);
        await ctx.run('saveHandoff', ctx.settings.commandTimeoutMs, (): Promise<unknown> =>
          at === 0
            ? ctx.conn.client.set(transfer, piece, 'PX', HANDOFF_TRANSFER_TTL_MS)
            : ctx.conn.client.append(transfer, piece),
        );
      }
      const ttlMs = ctx.settings.blockTtlSeconds * 1000;
      const call = handoffCall(base, pod.podId, transfer, ttlMs, [expected], ctx.settings.fence);
      const r = await ctx.script('saveHandoff', SCRIPTS.saveHandoff, call);
      ctx.fenceCheck(r, pod.model, `saveHandoff of pod ${pod.podId}`);
      return r === 1;
    } catch (err) {
      await this.#dropTransfer(transfer);
      throw err;
    }
  }

  async takeHandoff(pod: PodRef): Promise<HandoffTake> {
    const { ctx } = this;
    const base = ctx.base(pod.model);
    const transfer = handoffTransferKey(base, randomBytes(8).toString('hex'));
    const call = handoffCall(base, pod.podId, transfer, HANDOFF_TRANSFER_TTL_MS, [], ctx.settings.fence);
    const r = await ctx.script('takeHandoff', SCRIPTS.takeHandoff, call);
    ctx.fenceCheck(r, pod.model, `takeHandoff of pod ${pod.podId}`);
    if (!Array.isArray(r)) throw new KinferenceError('KINF_ERR_REDIS', 'take-handoff: unexpected reply');
    if (r[0] === 2) return { kind: 'stale' };
    if (r[0] !== 1) return { kind: 'none' };
    try {
      const length = Number(r[1]);
      const pieces: Buffer[] = [];
      for (let at = 0; at < length; at += HANDOFF_CHUNK_BYTES) {
        const last = Math.min(length, at + HANDOFF_CHUNK_BYTES) - 1;
        pieces.push(
          await ctx.run('takeHandoff', ctx.settings.commandTimeoutMs, () =>
            ctx.conn.client.getrangeBuffer(transfer, at, last),
          ),
        );
      }
      const bytes = Buffer.concat(pieces);
      if (bytes.length !== length)
        throw new KinferenceError('KINF_ERR_REDIS', 'take-handoff: the record was gone before it was read');
      return { kind: 'found', record: bytes.toString('utf8') };
    } finally {
      await this.#dropTransfer(transfer);
    }
  }

  /** Best effort: the transfer key expires anyway. UNLINK frees a large value off Redis's main thread. */
  async #dropTransfer(key: string): Promise<void> {
    await this.ctx
      .run('handoff cleanup', this.ctx.settings.commandTimeoutMs, () => this.ctx.conn.client.unlink(key))
      .catch(() => undefined);
  }
}
