/**
 * The same query over the same records, in memory: runShardTrigger (the engine core every
 * trigger runs) with the memory checkpoint, sink and dead-letter writer, one state partition per
 * shard, the records in shard order in batches of `batchSize`, then one scheduled trigger with no
 * records (as the scheduled Lambda does after the shards are drained). No AWS code at all: if the
 * emulator runs agree with this, the adapters added nothing and lost nothing.
 */
import type { StreamingQueryDefinition } from '../../api/query-definition.js';
import { validateQuery } from '../../api/validate-query.js';
import { MemoryCheckpoint } from '../../checkpoint/memory-checkpoint.js';
import { runShardTrigger } from '../../runtime/shard-trigger.js';
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
  definition: StreamingQueryDefinition, records: readonly PlacedRecord[], options: { batchSize: number; shards: number },
): Promise<ReferenceResult> {
  const validated = validateQuery(definition, { expectedShardCount: options.shards });
  const byShard = new Map<string, ShardRecord[]>();
  for (const r of records) {
    let list = byShard.get(r.shardId);
    if (!list) byShard.set(r.shardId, (list = []));
    list.push({ sequenceNumber: r.sequenceNumber, partitionKey: r.partitionKey, dataBase64: Buffer.from(r.data, 'utf8').toString('base64'), approximateArrivalTimestampMs: 0 });
  }
  const rows: Record<string, unknown>[] = [];
  const deadLetters: DeadLetterRecord[] = [];
  let batches = 0;
  for (const [shardId, list] of [...byShard].sort(([a], [b]) => (a < b ? -1 : 1))) {
    list.sort((a, b) => (BigInt(a.sequenceNumber) < BigInt(b.sequenceNumber) ? -1 : 1));
    const backends = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new MemoryDeadLetterWriter() };
    const chunks: ShardRecord[][] = [];
    for (let i = 0; i < list.length; i += options.batchSize) chunks.push(list.slice(i, i + options.batchSize));
    for (const [i, chunk] of [...chunks, []].entries()) {
      const result = await runShardTrigger({
        definition, shardId, records: chunk, expectedShardCount: options.shards, scheduled: i === chunks.length,
      }, backends);
      if (result.error) throw result.error;
      batches += result.progress.length;
    }
    const external = backends.sink.allRows().map((row) => toExternalRow(row, validated.schema));
    rows.push(...finalRows(definition.outputMode, external, validated.keyColumns.length > 0 ? validated.keyColumns : keyColumnsOf(definition)));
    deadLetters.push(...backends.deadLetters.records);
  }
  return { rows, deadLetters, batches };
}

/** Grouping columns for the comparison when the sink does not declare them (the window and the keys). */
export function keyColumnsOf(definition: StreamingQueryDefinition): string[] {
  return validateQuery({ ...definition, sink: { kind: 'dynamodb' }, outputMode: definition.outputMode }, {}).keyColumns.slice();
}

/** What a sink holds at the end: every row (append), the last row per key (update), the last batch (complete, already). */
function finalRows(mode: string, rows: Record<string, unknown>[], keyColumns: readonly string[]): Record<string, unknown>[] {
  if (mode !== 'update') return rows;
  const latest = new Map<string, Record<string, unknown>>();
  for (const row of rows) latest.set(canonicalJson(keyColumns.map((c) => row[c] ?? null)), row);
  return [...latest.values()];
}
