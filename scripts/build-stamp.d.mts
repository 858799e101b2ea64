/** Types for scripts/build-stamp.mjs (spec/01-unit/layout/build-if-stale.spec.ts imports it). */
export declare function sourcesTime(): number;
export declare function writeStamp(time: number): void;
export declare function isStale(): boolean;
