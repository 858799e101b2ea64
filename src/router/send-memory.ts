// SendMemory: the prompts this router sent to each pod, as sampled block keys, bounded by the pod's KV.
import type { BlockKey, PodId } from '../core/types.js';

/** Every STRIDE-th block key of a prompt is remembered (and its last): credit is found to within 16 blocks. */
export const SEND_MEMORY_STRIDE = 16;
/** Remembered keys per pod when its KV capacity is unknown (×16 blocks: a million tokens at block size 16). */
export const SEND_MEMORY_DEFAULT_KEYS = 4096;

/**
 * The prompts this router sent to each pod, as sampled block keys in least-recently-sent order, bounded to
 * about what the pod's KV cache holds (vLLM evicts least recently used blocks too). It stands in for the
 * index where the index lost what it knew: after a partial rebuild (PodState.partialSinceMs) a prompt this
 * router sent before is most likely still cached where it went, though no event will say so until it is
 * stored again or reused with a reuse report.
 */
export class SendMemory {
  readonly #byPod = new Map<PodId, Map<BlockKey, true>>();

  /** Remembers `keys` as sent to `podId` now; `maxKeys` bounds the pod's memory (least recently sent go). */
  record(podId: PodId, keys: readonly BlockKey[], maxKeys = SEND_MEMORY_DEFAULT_KEYS): void {
    if (keys.length === 0 || maxKeys <= 0) return;
    let m = this.#byPod.get(podId);
    if (!m) this.#byPod.set(podId, (m = new Map()));
    const put = (k: BlockKey): void => {
      m.delete(k); // re-inserted: most recently sent
      m.set(k, true);
    };
    for (let i = SEND_MEMORY_STRIDE - 1; i < keys.length; i += SEND_MEMORY_STRIDE) put(keys[i]!);
    put(keys[keys.length - 1]!);
    for (const k of m.keys()) {
      if (m.size <= maxKeys) break;
      m.delete(k);
    }
  }

  /** Keys remembered, every pod's. */
  get size(): number {
    let n = 0;
    for (const m of this.#byPod.values()) n += m.size;
    return n;
  }

  /**
   * Blocks of the longest prefix of `keys` this router sent to the pod, to within SEND_MEMORY_STRIDE blocks.
   * Keys are chained (a key fixes every block before it), so one remembered key proves the whole prefix.
   */
  prefixBlocks(podId: PodId, keys: readonly BlockKey[]): number {
    const m = this.#byPod.get(podId);
    if (!m || keys.length === 0) return 0;
    if (m.has(keys[keys.length - 1]!)) return keys.length;
    // The longest first: any remembered key proves its prefix, whatever became of the keys before it.
    const top = Math.floor(keys.length / SEND_MEMORY_STRIDE) * SEND_MEMORY_STRIDE - 1;
    for (let i = top; i >= 0; i -= SEND_MEMORY_STRIDE) if (m.has(keys[i]!)) return i + 1;
    return 0;
  }
}
