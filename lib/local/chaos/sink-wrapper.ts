import type { Sink, SinkBatch } from '../../sinks/sink.js';

/**
 * `inner` with its writes going through `addBatch`, and everything else it declares forwarded:
 * its row limits (checked before any write), its row screen (row screening blames a record
 * whose partial aggregation raises, instead of a search per record), and its commit hook (the
 * files sink reveals a committed batch there). A wrapper that drops one of them changes what the
 * query does under the harness.
 */
export function withWrites(inner: Sink, addBatch: (batch: SinkBatch) => Promise<void>): Sink {
  return {
    description: inner.description,
    supportedOutputModes: inner.supportedOutputModes,
    ...(inner.rowLimits ? { rowLimits: inner.rowLimits } : {}),
    ...(inner.screenRow ? { screenRow: (row: readonly unknown[]) => inner.screenRow!(row) } : {}),
    addBatch,
    onCommitted: async (partitionId: string, batchId: number) => inner.onCommitted?.(partitionId, batchId),
  };
}
