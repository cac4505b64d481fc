/**
 * The same query over the same records, in memory: runShardInvocation (the engine core every
 * invocation runs) with the memory checkpoint, sink and dead-letter writer, as ONE state partition
 * holding every record in the order they were put, in batches of `batchSize` (a wave put after the
 * run settled starts a batch of its own), then one scheduled invocation with no records. No AWS code, no shards, no cross-shard watermark: Spark's answer for
 * one stream. The distributed run must end with the same result: while data flows its shards run
 * with the minimum watermark (a subset of the windows closed), and once every shard is idle the
 * scheduled invocation takes the maximum, which is this run's watermark.
 */
import { sourcesOf, type MultiSourceQueryDefinition, type QueryDefinition, type StreamingQueryDefinition } from '../../query/query-definition.js';
import { sourceSchemaOf } from '../../query/validate-query.js';
import { SluiceSession } from '../../api/session.js';
import { createRecordDecoder } from '../../sources/record-decoder.js';
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
  definition: StreamingQueryDefinition, records: readonly PlacedRecord[],
  options: { batchSize: number; /** Where each later wave starts in `records`: no batch holds records of two waves. */ waveStarts?: readonly number[] },
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
  // The distributed run puts wave 2 only once wave 1 is done: a wave's late rows meet the watermark
  // of all the waves before, never a batch shared with their last records (which records a run
  // lost to retention must not move a wave-2 record into wave 1's last batch).
  const bounds = [0, ...(options.waveStarts ?? []), list.length];
  for (let w = 0; w + 1 < bounds.length; w++) {
    for (let i = bounds[w]!; i < bounds[w + 1]!; i += options.batchSize) chunks.push(list.slice(i, Math.min(i + options.batchSize, bounds[w + 1]!)));
  }
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
export function keyColumnsOf(definition: QueryDefinition): string[] {
  return validateQuery({ ...definition, sink: { kind: 'dynamodb' } }, { expectedShardCount: 1, allowRepartition: true }).keyColumns.slice();
}

/** What a sink holds at the end: every row (append), the last row per key (update), the last batch (complete). */
function finalRows(mode: string, rows: Record<string, unknown>[], keyColumns: readonly string[]): Record<string, unknown>[] {
  if (mode !== 'update') return rows;
  const latest = new Map<string, Record<string, unknown>>();
  for (const row of rows) latest.set(canonicalJson(keyColumns.map((c) => row[c] ?? null)), row);
  return [...latest.values()];
}

/**
 * A query over several streams, in memory: the session's JSON memory streams (decoded as the
 * Kinesis source decodes), each wave's records of every stream added as one batch, every batch run.
 * Spark's answer for the query when all data of a wave arrives at once. Undecodable records come
 * back as dead letters (shard and sequence number unknown here).
 */
export async function runMultiSourceInMemory(
  definition: MultiSourceQueryDefinition, waves: readonly Readonly<Record<string, readonly PlacedRecord[]>>[],
): Promise<ReferenceResult> {
  const session = new SluiceSession(definition.conf ?? {});
  const streams = Object.fromEntries(sourcesOf(definition).map((s) => [s.name, session.jsonMemoryStream(sourceSchemaOf(s.spec), { name: s.name })]));
  const result = definition.transform(Object.fromEntries(Object.entries(streams).map(([n, s]) => [n, s.df])), session);
  const sink = new MemorySink();
  const query = await result.writeStream.outputMode(definition.outputMode).sink(sink).start();
  let batches = 0;
  for (const wave of waves) {
    for (const [name, records] of Object.entries(wave)) if (records.length > 0) streams[name]!.stream.addData(records.map((r) => r.data));
    await query.processAllAvailable();
    batches++;
  }
  await query.stop();
  const schema = result.plan.output.map((a) => ({ name: a.name, type: a.type }));
  const external = sink.allRows().map((row) => toExternalRow(row, schema as never));
  // Dead letters as a source stage decodes its stream: every column of the source's schema (the
  // memory stream decodes only the columns the query reads, so it lets more records through).
  const deadLetters: DeadLetterRecord[] = sourcesOf(definition).flatMap((s) => {
    const decode = createRecordDecoder(s.spec, sourceSchemaOf(s.spec));
    return waves.flatMap((w) => w[s.name] ?? []).flatMap((r) => {
      const decoded = decode(Buffer.from(r.data, 'utf8'));
      return decoded.ok ? [] : [{
        queryName: definition.name, shardId: '', sequenceNumber: '', partitionKey: r.partitionKey,
        approximateArrivalTimestampMs: 0, dataBase64: Buffer.from(r.data, 'utf8').toString('base64'), reason: decoded.reason,
      }];
    });
  });
  return { rows: finalRows(definition.outputMode, external, keyColumnsOf(definition)), deadLetters, batches };
}
