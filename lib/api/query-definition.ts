/**
 * Moved to lib/query/query-definition.ts (the deployable query sits above the API). This type-only
 * re-export remains until lib/sources/record-decoder.ts takes its own options type; then delete it.
 */
export type { KinesisSourceSpec } from '../query/query-definition.js';
