// Loads a tokenizer in a worker thread; the plugin's thread only rebuilds the JS engine's maps, in slices.
import { runInSlices } from '../bpe/slices.js';
import type { Tokenizer } from '../types.js';
import { loadInWorker } from './client.js';
import type { TokenizerSource } from './protocol.js';
import { RemoteTokenizer } from './remote-tokenizer.js';
import { engineFromPacked } from './transfer.js';

export { stopTokenizerWorker } from './client.js';
export type { TokenizerSource } from './protocol.js';

/**
 * The tokenizer of `spec`, loaded in the process's tokenizer worker: reading and parsing the file, the native
 * encoder's constructor and the probe check run there; this thread receives the JS engine's tables
 * (transferred, no copy) and rebuilds its string maps in slices of a few milliseconds. Rejects with the
 * load's KinferenceError (a bad file), or a plain Error when the worker itself failed.
 */
export async function loadTokenizerOffThread(spec: string, source: TokenizerSource): Promise<Tokenizer> {
  const info = await loadInWorker(spec, source);
  let fast = null;
  if (info.tables) {
    const engine = await runInSlices(engineFromPacked(info.tables));
    if (!('unsupported' in engine)) fast = engine;
  }
  return new RemoteTokenizer(spec, source, info, fast);
}
