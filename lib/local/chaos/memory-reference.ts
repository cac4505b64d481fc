/**
 * The same query over the same records, in memory: runShardInvocation (the engine core every
 * invocation runs) with the memory checkpoint, sink and dead-letter writer, as ONE state partition
 * holding every record in the order they were put, in batches of `batchSize`, then one scheduled
 * invocation with no records. No AWS code, no shards, no cross-shard watermark: Spark's answer for
 * one stream. The distributed run must end with the same result: while data flows its shards run
 * with the minimum watermark (a subset of the windows closed), and once every shard is idle the
 * scheduled invocation takes the maximum, which is this run's watermark.
 */
import type { StreamingQueryDefinition } from '../../query/query-definition.js';
import { compileQuery } from '../../query/compiled-query.js';
import { validateQuery } from '../../query/validate-query.js';
import { MemoryCheckpoint } from '../../checkpoint/memory-checkpoint.js';
import { runShardInvocation } from '../../query/shard-invocation.js';
import { toExternalRow } from '../../sinks/external-row.js';
import { MemorySink } from '../../sinks/memory-sink.js';
import { MemoryDeadLetterWriter, type DeadLetterRecord } from '../../sources/dead-letter.js';
import type { ShardRecord } from '../../sources/kinesis-shard-source.js';
import { canonicalJson } from './compare.js';

export interface PlacedRecord {
  readonly shardId: string;
  readonly sequenceNumber: string;
  readonly partitionKey: string;
  readonly data: string;
}

export interface ReferenceResult {
  readonly rows: Record<string, unknown>[];
  readonly deadLetters: DeadLetterRecord[];
  readonly batches: number;
}

export async function runInMemory(
  definition: StreamingQueryDefinition, records: readonly PlacedRecord[], options: { batchSize: number },
): Promise<ReferenceResult> {
  const query = compileQuery(definition, { expectedShardCount: 1 });
  // One partition's sequence numbers must grow: number the records in put order.
  const list: ShardRecord[] = records.map((r, i) => ({
    sequenceNumber: String(1_000_000 + i), partitionKey: r.partitionKey,
    dataBase64: Buffer.from(r.data, 'utf8').toString('base64'), approximateArrivalTimestampMs: 0,
  }));
  const shardId = 'memory';
  const backends = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new MemoryDeadLetterWriter() };
  const chunks: ShardRecord[][] = [];
  for (let i = 0; i < list.length; i += options.batchSize) chunks.push(list.slice(i, i + options.batchSize));
  let batches = 0;
  for (const [i, chunk] of [...chunks, []].entries()) {
    const result = await runShardInvocation(query, { shardId, records: chunk, scheduled: i === chunks.length }, backends);
    if (result.error) throw result.error;
    batches += result.progress.length;
  }
  const external = backends.sink.allRows().map((row) => toExternalRow(row, query.schema));
  return { rows: finalRows(definition.outputMode, external, keyColumnsOf(definition)), deadLetters: backends.deadLetters.records, batches };
}

/** The columns that identify a result row (the window and the grouping keys), whatever the sink. */
export function keyColumnsOf(definition: StreamingQueryDefinition): string[] {
  return validateQuery({ ...definition, sink: { kind: 'dynamodb' } }, { expectedShardCount: 1 }).keyColumns.slice();
}

/** What a sink holds at the end: every row (append), the last row per key (update), the last batch (complete). */
function finalRows(mode: string, rows: Record<string, unknown>[], keyColumns: readonly string[]): Record<string, unknown>[] {
  if (mode !== 'update') return rows;
  const latest = new Map<string, Record<string, unknown>>();
  for (const row of rows) latest.set(canonicalJson(keyColumns.map((c) => row[c] ?? null)), row);
  return [...latest.values()];
}
