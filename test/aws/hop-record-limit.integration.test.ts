/**
 * Issue 11, limits: what crosses the repartition hop must fit one Kinesis record (1 MiB). Two ways
 * it did not, both blocking stage 1's source shard (PutRecords refuses the whole call on every
 * retry) until the mapping gave up:
 *   - a partial aggregate larger than the limit (collect_list of one key's many rows in one batch):
 *     the batch sends its rows instead, each of which fits, and stage 2 aggregates them;
 *   - a row larger than the limit after stage 1's stateless part (`repeat` of a large note): it
 *     cannot cross at all, so its record is dead-lettered with the limit, and the shard moves on.
 * Runs on kinesis-mock, which enforces the 1 MiB record limit as Kinesis does.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineQuery, type StreamingQueryDefinition } from '../../lib/query/query-definition.js';
import { SluiceSession } from '../../lib/api/session.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { readDeadLetters } from '../../lib/aws/s3-dead-letter-writer.js';
import { readS3Files } from '../../lib/aws/sink-readers.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { col, collect_list, count, max, repeat, window } from '../../lib/plan/functions.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { toExternalRow } from '../../lib/sinks/external-row.js';
import { parseTimestamp } from '../../lib/core/timestamps.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { deploy } from '../support/aws-pipeline.js';

const SCHEMA = 'k string, note string, ts timestamp';
interface Event { k: string; note: string; ts: string }
const at = (minute: number): string => new Date(Date.UTC(2024, 4, 1, 14, minute)).toISOString();

const notesPerKey = (df: DataFrame): DataFrame => df.withWatermark('ts', '10 minutes')
  .groupBy(window(col('ts'), '1 hour'), col('k')).agg(count('*').as('n'), collect_list('note').as('notes'));
// Below the watermark, so stage 1 computes it (the stateless part under the watermark runs before the hop).
const longestTripled = (df: DataFrame): DataFrame => df.withColumn('big', repeat(col('note'), 3))
  .withWatermark('ts', '10 minutes')
  .groupBy(window(col('ts'), '1 hour'), col('k')).agg(count('*').as('n'), max('big').as('big'));

const def = (name: string, transform: (df: DataFrame) => DataFrame): StreamingQueryDefinition =>
  defineQuery({ name, source: { schema: SCHEMA }, transform, outputMode: 'append', sink: { kind: 's3-files' } });

async function answerOver(transform: (df: DataFrame) => DataFrame, events: readonly Event[]): Promise<string[]> {
  const session = new SluiceSession();
  const { stream, df } = session.memoryStream(SCHEMA);
  const result = transform(df);
  const sink = new MemorySink();
  const q = await result.writeStream.outputMode('append').sink(sink).start();
  stream.addData(events.map((e) => [e.k, e.note, parseTimestamp(e.ts)]));
  await q.processAllAvailable();
  // Past the watermark: every window is emitted.
  stream.addData([['zz', 'x', parseTimestamp('2024-05-02T00:00:00Z')]]);
  await q.processAllAvailable();
  await q.stop();
  const schema = result.plan.output.map((a) => ({ name: a.name, type: a.type }));
  return canonical(sink.allRows().map((r) => toExternalRow(r, schema)));
}
const canonical = (rows: Record<string, unknown>[]): string[] => rows.map((r) => JSON.stringify(r)).sort();

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

describe('records of the repartition hop over Kinesis\'s 1 MiB (kinesis-mock)', () => {
  it('a partial aggregate over 1 MiB: the batch sends its rows instead, nothing blocks, the sink is the answer', async () => {
    const query = def('hop-big-partial', notesPerKey);
    expect(compileQuery(query, { allowRepartition: true }).hops[0]!.partial).not.toBeNull();
    // 300 notes of 5,000 characters under one key in one batch: its collect_list partial is ~1.5 MB.
    const events: Event[] = [
      ...Array.from({ length: 300 }, (_, i) => ({ k: 'a', note: `${i}:`.padEnd(5_000, 'x'), ts: at(i % 50) })),
      { k: 'b', note: 'small', ts: at(5) },
      { k: 'zz', note: 'x', ts: '2024-05-02T00:00:00Z' },
    ];
    const d = await deploy(emulators, query, 1, { repartitionShards: 1, expectedShardCount: undefined });
    await d.put(events.map((e) => ({ data: JSON.stringify(e), partitionKey: 'p' })));
    await d.drain({ batchSize: 500, maximumRetryAttempts: 2 });
    await d.tick(Date.now() + 3_600_000);
    await d.tick(Date.now() + 3_600_000);
    expect(d.results.map((r) => r.result.error?.message).filter(Boolean)).toEqual([]);
    const rows = await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix);
    expect(canonical(rows)).toEqual(await answerOver(notesPerKey, events.slice(0, -1)));
    expect(rows.find((r) => r.k === 'a')?.n).toBe(300);
  });

  it('a row over 1 MiB after stage 1: its record is dead-lettered with the limit, the rest reach the sink', async () => {
    const query = def('hop-big-row', longestTripled);
    // A 400,000-character note, tripled: a 1.2 MB row that no record of the hop can hold.
    const big: Event = { k: 'big', note: 'y'.repeat(400_000), ts: at(3) };
    const small = Array.from({ length: 6 }, (_, i) => ({ k: `k${i}`, note: `n${i}`, ts: at(i) }));
    const events = [...small.slice(0, 3), big, ...small.slice(3), { k: 'zz', note: 'x', ts: '2024-05-02T00:00:00Z' }];
    const d = await deploy(emulators, query, 1, { repartitionShards: 1, expectedShardCount: undefined });
    await d.put(events.map((e) => ({ data: JSON.stringify(e), partitionKey: 'p' })));
    await d.drain({ batchSize: 100, maximumRetryAttempts: 2 });
    await d.tick(Date.now() + 3_600_000);
    await d.tick(Date.now() + 3_600_000);
    const letters = await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix);
    expect(letters.map((l) => (JSON.parse(Buffer.from(l.dataBase64, 'base64').toString()) as Event).k)).toEqual(['big']);
    expect(letters[0]!.reason).toMatch(/SINK_ITEM_TOO_LARGE/);
    expect(letters[0]!.reason).toMatch(/1 MiB/);
    const rows = await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix);
    expect(canonical(rows)).toEqual(await answerOver(longestTripled, [...small.slice(0, 3), ...small.slice(3)]));
  });
});
