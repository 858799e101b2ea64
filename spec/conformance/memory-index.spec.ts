import { MemoryKvIndex } from '../../src/index/memory-index.js';
import { describeKvIndexConformance } from './kv-index.js';

describeKvIndexConformance('MemoryKvIndex', () => new MemoryKvIndex());
