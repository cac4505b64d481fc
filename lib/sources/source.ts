import type { StructField } from '../plan/data-types.js';

/** A source position, JSON-serialisable so it can be written to the offset log. */
export type Offset = number | string | Record<string, unknown>;

/**
 * A streaming source in Spark's micro-batch model: the engine asks for the latest offset, plans a
 * batch `(start, end]`, records it in the offset log, then reads exactly that range (again, after a
 * crash). `getBatch` must return the same rows for the same range.
 */
export interface MicroBatchStream {
  readonly name: string;
  readonly schema: readonly StructField[];
  initialOffset(): Offset | null;
  latestOffset(): Offset | null;
  getBatch(start: Offset | null, end: Offset): unknown[][];
  /** Everything up to `end` is committed; the source may forget it. */
  commit(end: Offset): void;
  /** Records in `(start, end]` that could not be decoded and went to the dead-letter location. */
  numInvalidRecords?(start: Offset | null, end: Offset): number;
  /**
   * Column pruning (Spark's SupportsPushDownRequiredColumns): before the first batch, the engine
   * names the columns the query reads. A source that decodes records may leave the others NULL;
   * a source read by several queries gets one call per query and must keep what any of them reads.
   */
  pruneColumns?(columns: readonly string[]): void;
}

/** The live sources of a query, by the source id its plan names each with. */
export type SourceRegistry = ReadonlyMap<string, MicroBatchStream>;
