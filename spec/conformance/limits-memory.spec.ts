import { MemoryLimitStore } from '../../src/limits/index.js';
import { describeLimitStoreConformance } from './limits.js';

describeLimitStoreConformance('MemoryLimitStore', async () => {
  const store = new MemoryLimitStore();
  return { store, close: () => store.close() };
});
