/**
 * Issue 5's acceptance test on the emulators: queries whose state keys the stream is not
 * partitioned by run through the repartition stage (source stream → stage 1 → internal stream →
 * stage 2 → sink) with 1, 2 and 4 source shards and random partition keys, and end with the same
 * sink contents every time, equal to the engine's in-memory answer. Issue 12: chained stateful
 * operators (dedup → aggregate, aggregate → aggregate) through two hops, three stages.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineQuery, type StreamingQueryDefinition } from '../../lib/query/query-definition.js';
import { SluiceSession } from '../../lib/api/session.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { readS3Files, readS3Snapshots, scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { col, count, sum, window, window_time } from '../../lib/plan/functions.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { toExternalRow } from '../../lib/sinks/external-row.js';
import { parseTimestamp } from '../../lib/core/timestamps.js';
import type { OutputMode } from '../../lib/core/output-mode.js';
import { deploy } from '../support/aws-pipeline.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { listAllShards, splitShardEvenly } from '../../lib/local/kinesis-admin.js';

const SCHEMA = 'user_id string, event_type string, ts timestamp';
interface Event { user_id: string; event_type: string; ts: string }

function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => { s = (s * 1664525 + 1013904223) >>> 0; return s / 2 ** 32; };
}
const rand = prng(7);
const events: Event[] = Array.from({ length: 80 }, (_, i) => ({
  user_id: `u${Math.floor(rand() * 9)}`,
  event_type: ['click', 'view', 'buy'][Math.floor(rand() * 3)]!,
  ts: new Date(Date.UTC(2024, 4, 1, 14, 0) + i * 45_000).toISOString(),
}));

type Sink = StreamingQueryDefinition['sink'];
const def = (name: string, outputMode: OutputMode, sink: Sink, transform: (df: DataFrame) => DataFrame): StreamingQueryDefinition =>
  defineQuery({ name, source: { schema: SCHEMA }, transform, outputMode, sink });
const windowed = (df: DataFrame): DataFrame => df.withWatermark('ts', '10 minutes')
  .groupBy(window(col('ts'), '15 minutes'), col('user_id')).agg(count('*').as('events'));

const queries: [string, StreamingQueryDefinition, number[]][] = [
  ['windowed count by user (append → S3 files)', def('win-append', 'append', { kind: 's3-files' }, windowed), [1, 2, 4]],
  ['windowed count by user (update → DynamoDB)', def('win-update', 'update', { kind: 'dynamodb' }, windowed), [1, 2, 4]],
  ['windowed count by user (complete → S3 snapshot)', def('win-complete', 'complete', { kind: 's3-snapshot' }, windowed), [1, 2, 4]],
  ['global count by event_type (update → DynamoDB)', def('by-type', 'update', { kind: 'dynamodb' }, (df) => df.groupBy(col('event_type')).agg(count('*').as('events'))), [1, 4]],
  ['dedup by user_id (append → S3 files)', def('dedup', 'append', { kind: 's3-files' }, (df) => df.dropDuplicates(['user_id']).select('user_id')), [1, 4]],
];

function canonical(rows: Record<string, unknown>[], mode: OutputMode, keyOf: (r: Record<string, unknown>) => string): string[] {
  if (mode !== 'update') return rows.map((r) => JSON.stringify(r)).sort();
  const latest = new Map<string, string>();
  for (const r of rows) latest.set(keyOf(r), JSON.stringify(r));
  return [...latest.values()].sort();
}

async function inMemory(query: StreamingQueryDefinition, input: readonly Event[] = events): Promise<string[]> {
  const session = new SluiceSession();
  const { stream, df } = session.memoryStream(SCHEMA);
  const result = query.transform(df, session);
  const sink = new MemorySink();
  const q = await result.writeStream.outputMode(query.outputMode).sink(sink).start();
  stream.addData(input.map((e) => [e.user_id, e.event_type, parseTimestamp(e.ts)]));
  await q.processAllAvailable();
  await q.stop();
  const schema = result.plan.output.map((a) => ({ name: a.name, type: a.type }));
  const rows = sink.allRows().map((r) => toExternalRow(r, schema));
  return canonical(rows, query.outputMode, (r) => JSON.stringify(Object.entries(r).slice(0, -1)));
}

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

/** Every fourth event sent twice (a producer retry), right after itself: something for a dedup to drop. */
const withRetries = events.flatMap((e, i) => (i % 4 === 0 ? [e, e] : [e]));

/** Chained stateful operators (Spark 4, append): each needs two hops, three stages. */
const chained: [string, StreamingQueryDefinition, number[]][] = [
  ['dedup within watermark → windowed count (append → S3 files)', def('dedup-then-count', 'append', { kind: 's3-files' }, (df) => df
    .withWatermark('ts', '10 minutes').dropDuplicatesWithinWatermark(['user_id', 'ts'])
    .groupBy(window(col('ts'), '15 minutes'), col('event_type')).agg(count('*').as('events'))), [1, 2, 4]],
  ['windowed count per user → 20-minute count and sum (append → S3 files)', def('count-then-coarser', 'append', { kind: 's3-files' }, (df) => df
    .withWatermark('ts', '10 minutes').groupBy(window(col('ts'), '5 minutes'), col('user_id')).agg(count('*').as('events'))
    .groupBy(window(window_time(col('window')), '20 minutes')).agg(count('*').as('users'), sum(col('events')).as('events'))), [1, 2, 4]],
];

// REPARTITION_SHARDS=8 (a list) runs every shape on other source shard counts than 1, 2 and 4.
const SHARD_COUNTS = process.env.REPARTITION_SHARDS?.split(',').map(Number);

describe('repartition stage on the emulators: the same answer on 1, 2 or 4 shards', () => {
  for (const [name, query, shardCounts, input, hops] of [
    ...queries.map(([n, q, s]) => [n, q, s, events, 1] as const),
    ...chained.map(([n, q, s]) => [n, q, s, withRetries, 2] as const),
  ]) {
    it(name, async () => {
      const expected = await inMemory(query, input);
      expect(expected.length).toBeGreaterThan(0);
      expect(compileQuery(query, { allowRepartition: true }).hops.length).toBe(hops);
      for (const shards of SHARD_COUNTS ?? shardCounts) {
        const d = await deploy(emulators, query, shards, { repartitionShards: 2, expectedShardCount: undefined, hops });
        // Random partition keys: a user's events land on any shard.
        await d.put(input.map((e, i) => ({ data: JSON.stringify(e), partitionKey: `k${(i * 7919) % 101}` })));
        await d.drain();
        await d.tick(Date.now() + 3_600_000); // the sources are caught up and quiet: idle
        await d.tick(Date.now() + 3_600_000);
        if (hops > 1) await d.tick(Date.now() + 3_600_000);
        const sinkRows = query.sink.kind === 'dynamodb'
          ? await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!)
          : query.sink.kind === 's3-files'
            ? await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix)
            : await readS3Snapshots(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix);
        const got = canonical(sinkRows, query.outputMode, (r) => JSON.stringify(Object.entries(r).slice(0, -1)));
        expect({ shards, rows: got }).toEqual({ shards, rows: expected });
        const errors = d.results.map((r) => r.result.error?.message).filter(Boolean);
        expect(errors).toEqual([]);
      }
    });
  }

  it('a split of the source stream mid-way loses and duplicates nothing (stage 1 is stateless)', async () => {
    const query = queries[3]![1]; // global count by event_type, update → DynamoDB
    const expected = await inMemory(query);
    const d = await deploy(emulators, query, 1, { repartitionShards: 2, expectedShardCount: undefined });
    const records = events.map((e, i) => ({ data: JSON.stringify(e), partitionKey: `k${(i * 7919) % 101}` }));
    await d.put(records.slice(0, 40));
    await d.drain();
    const [parent] = await listAllShards(d.clients.kinesis, d.config.streamName);
    await splitShardEvenly(d.clients.kinesis, d.config.streamName, parent!.ShardId!);
    await d.put(records.slice(40));
    await d.drain();
    await d.tick(Date.now() + 3_600_000);
    await d.tick(Date.now() + 3_600_000);
    const rows = await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!);
    expect(canonical(rows, 'update', (r) => JSON.stringify(Object.entries(r).slice(0, -1)))).toEqual(expected);
    expect(new Set(d.results.map((r) => r.shardId)).size).toBeGreaterThanOrEqual(3);
  });
});
