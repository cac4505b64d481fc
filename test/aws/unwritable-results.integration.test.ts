/**
 * Issue 11 part 1, measured on DynamoDB Local: result rows the DynamoDB sink cannot store (a key
 * over 2048 bytes, an item over 400 KB) must not block the shard. The contributing records are
 * dead-lettered with the reason, the shard moves on, and the sink holds exactly the answer over
 * the records that were not dead-lettered: no row of a failed batch is left behind.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineQuery, type StreamingQueryDefinition } from '../../lib/query/query-definition.js';
import { SluiceSession } from '../../lib/api/session.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { readDeadLetters } from '../../lib/aws/s3-dead-letter-writer.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { col, collect_list, count, max, sum, window } from '../../lib/plan/functions.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { toExternalRow } from '../../lib/sinks/external-row.js';
import { parseTimestamp } from '../../lib/core/timestamps.js';
import { deploy, type Deployment } from '../support/aws-pipeline.js';
import type { DeadLetterRecord } from '../../lib/sources/dead-letter.js';

const SCHEMA = 'k string, amount long, note string, ts timestamp';
const notesByGroup = (df: DataFrame): DataFrame => df
  .withWatermark('ts', '15 minutes')
  .groupBy(window(col('ts'), '1 hour'), col('k'))
  .agg(sum('amount').as('total'), count('*').as('n'), max('note').as('longest'), collect_list('note').as('notes'));

function query(name: string): StreamingQueryDefinition {
  return defineQuery({
    name,
    // One shard, so no partition-key column: Kinesis keys stop at 256 characters, the grouping value does not.
    source: { schema: SCHEMA },
    transform: notesByGroup,
    outputMode: 'update',
    sink: { kind: 'dynamodb' },
  });
}

interface Event { k: string; amount: number; note: string; ts: string }
const at = (minute: number): string => new Date(Date.UTC(2024, 4, 1, 14, minute)).toISOString();
const small = (i: number, k = ['a', 'b', 'c'][i % 3]!): Event => ({ k, amount: i + 1, note: `n${i}`, ts: at(i % 50) });
const records = (events: readonly Event[]) => events.map((e) => ({ data: JSON.stringify(e), partitionKey: e.k.slice(0, 64) }));

/** The engine in memory over `events` (complete mode): what the sink must hold. */
async function answerOver(events: readonly Event[]): Promise<string[]> {
  const session = new SluiceSession();
  const { stream, df } = session.memoryStream(SCHEMA);
  const result = notesByGroup(df);
  const sink = new MemorySink();
  const q = await result.writeStream.outputMode('complete').sink(sink).start();
  stream.addData(events.map((e) => [e.k, e.amount, e.note, parseTimestamp(e.ts)]));
  await q.processAllAvailable();
  await q.stop();
  const schema = result.plan.output.map((a) => ({ name: a.name, type: a.type }));
  return canonical(sink.allRows().map((r) => toExternalRow(r, schema)));
}

function canonical(rows: Record<string, unknown>[]): string[] {
  return rows.map((r) => JSON.stringify([r.window, r.k, r.total, r.n, r.longest, r.notes])).sort();
}

const decoded = (letter: DeadLetterRecord): Event => JSON.parse(Buffer.from(letter.dataBase64, 'base64').toString()) as Event;

/** The sink equals the answer over every event not dead-lettered: nothing lost, nothing extra. */
async function expectSinkIsAnswerWithout(d: Deployment, events: readonly Event[], letters: readonly DeadLetterRecord[]): Promise<void> {
  const lettered = new Set(letters.map((l) => JSON.stringify(decoded(l))));
  const kept = events.filter((e) => !lettered.has(JSON.stringify(e)));
  const table = await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!);
  expect(canonical(table)).toEqual(await answerOver(kept));
}

let emulators: EmulatorSet;
beforeAll(async () => {
  emulators = await startEmulators();
});
afterAll(async () => {
  await emulators?.stop();
});

describe('result rows the DynamoDB sink cannot store (DynamoDB Local)', () => {
  it('a 3,000-character grouping value: its record is dead-lettered, the rows after it reach the sink', async () => {
    const d = await deploy(emulators, query('key-too-long'), 1);
    const longKey = 'x'.repeat(3000);
    const events = [...Array.from({ length: 6 }, (_, i) => small(i)), small(6, longKey), ...Array.from({ length: 6 }, (_, i) => small(7 + i))];
    await d.put(records(events));
    await d.drain({ maximumRetryAttempts: 3 });
    const letters = await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix);
    expect(letters.map((l) => decoded(l).k.length)).toEqual([longKey.length]);
    expect(letters[0]!.reason).toMatch(/SINK_KEY_TOO_LONG/);
    expect(letters[0]!.reason).toMatch(/2048/);
    // The reason names the limit, never the value.
    expect(letters[0]!.reason).not.toMatch(/xxxxxxxx/);
    await expectSinkIsAnswerWithout(d, events, letters);
    expect(d.results.every((r) => r.result.error === undefined)).toBe(true);
    const progress = d.results.flatMap((r) => r.result.progress);
    expect(progress.reduce((n, p) => n + p.numInputRows + p.numDeadLetteredRows, 0)).toBe(events.length);
  });

  it('max(note) of 300 KB: the item would pass 400 KB; dead-lettered before any write, no uncommitted row left', async () => {
    const d = await deploy(emulators, query('item-too-large'), 1);
    const big: Event = { k: 'big', amount: 100, note: 'y'.repeat(300 * 1024), ts: at(5) };
    // 'big' has a small row first (committed), then the huge one lands in a batch beside other groups and a small 'big' record.
    const events = [small(0, 'big'), small(1), small(2), small(3), small(4), big, small(9, 'big'), small(5), small(6), small(7), small(8, 'big')];
    await d.put(records(events));
    await d.drain({ maximumRetryAttempts: 3 });
    const letters = await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix);
    // Only the 300 KB record: the small 'big' records beside it are storable and stay.
    expect(letters.map((l) => decoded(l).amount)).toEqual([100]);
    expect(letters.every((l) => /SINK_ITEM_TOO_LARGE/.test(l.reason) && /400 KB/.test(l.reason))).toBe(true);
    await expectSinkIsAnswerWithout(d, events, letters);
    expect(d.results.every((r) => r.result.error === undefined)).toBe(true);
  });

  it('collect_list growing past 400 KB, run by the scheduled function: the group keeps its last storable value', async () => {
    const d = await deploy(emulators, query('list-too-large'), 1);
    const chunk = (i: number): Event => ({ k: 'grow', amount: i, note: `${i}:${'z'.repeat(60 * 1024)}`, ts: at(10 + i) });
    const events = [...Array.from({ length: 10 }, (_, i) => chunk(i)), small(1), small(2)];
    await d.put(records(events.slice(0, 5)));
    await d.tick(Date.now(), 'drain');
    await d.put(records(events.slice(5)));
    const summary = await d.tick(Date.now(), 'drain') as { shards: { error?: string }[] };
    expect(summary.shards.every((s) => s.error === undefined)).toBe(true);
    const letters = await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix);
    expect(letters.length).toBeGreaterThan(0);
    expect(letters.every((l) => decoded(l).k === 'grow' && /SINK_ITEM_TOO_LARGE/.test(l.reason))).toBe(true);
    await expectSinkIsAnswerWithout(d, events, letters);
    const table = await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!);
    const grow = table.find((r) => r.k === 'grow')!;
    expect((grow.notes as string[]).length).toBeGreaterThanOrEqual(5);
  });
});
