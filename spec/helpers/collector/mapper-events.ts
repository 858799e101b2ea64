// storedEvent: a decoded GPU BlockStored event as the KeyMapper receives it, for the key-mapper specs.
import type { BlockStoredEvent } from '../../../src/collector/events.js';

/** A decoded GPU BlockStored of full-attention blocks of `blockSize`, as the KeyMapper receives it. */
export function storedEvent(
  blockSize: number,
  p: Partial<BlockStoredEvent> & Pick<BlockStoredEvent, 'hashes' | 'tokenIds'>,
): BlockStoredEvent {
  return {
    kind: 'stored',
    parent: null,
    blockSize,
    loraName: null,
    loraNameMissing: false,
    tier: 'GPU',
    extraKeys: null,
    groupIdx: null,
    specKind: null,
    ...p,
  };
}
