import { MemoryKvIndex } from '../../src/index/index.js';
import { describeKvIndexConformance } from './kv-index.js';

describeKvIndexConformance('MemoryKvIndex', () => new MemoryKvIndex());
