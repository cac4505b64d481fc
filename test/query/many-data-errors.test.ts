/**
 * Issue 11 part 4: any number of records whose own values raise an ANSI error (a zero divisor,
 * a malformed cast) in one batch are dead-lettered with their reasons and the rest commits. They
 * are found by row screening in one pass (lib/execution/row-screening.ts), not by a search per
 * record, which used to give up after 64 and block the shard.
 */
import { describe, expect, it } from 'vitest';
import { col, count, lit, sum, window } from '../../lib/plan/functions.js';
import { defineQuery, type StreamingQueryDefinition } from '../../lib/query/query-definition.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { MemoryDeadLetterWriter } from '../../lib/sources/dead-letter.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { RepartitionSink } from '../../lib/sinks/repartition-sink.js';
import { runShardInvocation } from '../../lib/query/shard-invocation.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { MemoryInternalStream } from '../support/memory-internal-stream.js';
import { countingRuns } from '../support/data-error-runs.js';

interface Event { k: string; amount: number | string; qty: number; ts?: string }
const SCHEMA = 'k string, amount long, qty long, ts timestamp';

let sequence = 1000n;
const records = (events: readonly Event[]): ShardRecord[] => events.map((e) => ({
  sequenceNumber: String(sequence++ * 1_000_000n), partitionKey: e.k,
  dataBase64: Buffer.from(JSON.stringify(e)).toString('base64'), approximateArrivalTimestampMs: 0,
}));
const decoded = (dataBase64: string): Event => JSON.parse(Buffer.from(dataBase64, 'base64').toString()) as Event;

function query(transform: (df: DataFrame) => DataFrame, schema = SCHEMA): StreamingQueryDefinition {
  return defineQuery({ name: 'many-bad', source: { schema, partitionKey: 'k' }, transform, outputMode: 'update', sink: { kind: 'dynamodb', keyColumns: ['k'] } });
}
const unitPrice = (df: DataFrame): DataFrame => df.groupBy(col('k')).agg(sum(col('amount').divide(col('qty'))).as('unit'), count('*').as('n'));

async function runOneShard(definition: StreamingQueryDefinition, delivered: ShardRecord[]) {
  const backends = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new MemoryDeadLetterWriter() };
  const { value: result, runs } = await countingRuns(() => runShardInvocation(compileQuery(definition, { expectedShardCount: 1 }), { shardId: 's', records: delivered }, backends));
  return { ...backends, result, runs };
}

describe('more than 64 records of one batch raise a data error', () => {
  it('200 zero divisors among 1,000 records: 200 dead letters with the reason, the other 800 summed, in a few trigger runs', async () => {
    const events = Array.from({ length: 1000 }, (_, i): Event => ({ k: ['a', 'b', 'c'][i % 3]!, amount: 6 * (i + 1), qty: i % 5 === 2 ? 0 : 2 }));
    const delivered = records(events);
    const r = await runOneShard(query(unitPrice), delivered);
    expect(r.result.error).toBeUndefined();
    expect(r.result.firstUncommittedSequenceNumber).toBeNull();
    const bad = delivered.filter((_, i) => i % 5 === 2);
    expect(r.deadLetters.records.map((d) => d.sequenceNumber).sort()).toEqual(bad.map((d) => d.sequenceNumber).sort());
    expect(r.deadLetters.records.every((d) => /^DIVIDE_BY_ZERO: \[DIVIDE_BY_ZERO\] Division by zero/.test(d.reason))).toBe(true);
    const expected = new Map<string, [number, number]>();
    events.forEach((e, i) => {
      if (i % 5 === 2) return;
      const [u, n] = expected.get(e.k) ?? [0, 0];
      expected.set(e.k, [u + (e.amount as number) / e.qty, n + 1]);
    });
    expect(Object.fromEntries(r.sink.allRows().map((row) => [row[0], row.slice(1)]))).toEqual(Object.fromEntries(expected));
    // The failed run, the run without the screened records, and the check that nothing more is due.
    expect(r.runs).toBeLessThanOrEqual(4);
  });

  it('a stateless query (the whole plan row-local): 100 zero divisors among 250 records, the other 150 written', async () => {
    const events = Array.from({ length: 250 }, (_, i): Event => ({ k: 'a', amount: i, qty: i % 5 < 2 ? 0 : 1 }));
    const stateless = defineQuery({
      name: 'per-record', source: { schema: SCHEMA, partitionKey: 'k' }, outputMode: 'append', sink: { kind: 's3-files', format: 'jsonl' },
      transform: (df) => df.select(col('k'), col('amount').divide(col('qty')).as('unit')),
    });
    const r = await runOneShard(stateless, records(events));
    expect(r.result.error).toBeUndefined();
    expect(r.deadLetters.records.map((d) => decoded(d.dataBase64).amount)).toEqual(events.filter((e) => e.qty === 0).map((e) => e.amount));
    expect(r.sink.allRows().map((row) => row[1])).toEqual(events.filter((e) => e.qty === 1).map((e) => e.amount));
  });

  it('malformed casts and zero divisors mixed: each record carries its own reason', async () => {
    const events = Array.from({ length: 300 }, (_, i): Event => ({ k: 'a', amount: 1, qty: i % 3 === 0 ? 0 : 1 }));
    const delivered = records(events);
    const castThenDivide = (df: DataFrame): DataFrame => df.groupBy(col('k')).agg(sum(col('code').cast('long').divide(col('qty'))).as('s'), count('*').as('n'));
    const withCodes = delivered.map((d, i) => ({ ...d, dataBase64: Buffer.from(JSON.stringify({ ...events[i], code: i % 4 === 1 ? `x${i}` : String(i) })).toString('base64') }));
    const r = await runOneShard(query(castThenDivide, 'k string, amount long, qty long, code string'), withCodes);
    expect(r.result.error).toBeUndefined();
    const reasons = new Map(r.deadLetters.records.map((d) => [d.sequenceNumber, d.reason]));
    withCodes.forEach((d, i) => {
      // The cast is evaluated first, so a record with both faults gets the cast's reason.
      if (i % 4 === 1) expect(reasons.get(d.sequenceNumber), String(i)).toMatch(/^CAST_INVALID_INPUT: .*'x\d+'.*"BIGINT"/);
      else if (i % 3 === 0) expect(reasons.get(d.sequenceNumber), String(i)).toMatch(/^DIVIDE_BY_ZERO/);
      else expect(reasons.has(d.sequenceNumber)).toBe(false);
    });
    const kept = events.map((_, i) => i).filter((i) => i % 4 !== 1 && i % 3 !== 0);
    expect(r.sink.allRows()).toEqual([['a', kept.reduce((s, i) => s + i, 0), kept.length]]);
  });

  it('a filter before the division: a filtered-out zero divisor is not evaluated, so not blamed', async () => {
    const events = Array.from({ length: 200 }, (_, i): Event => ({ k: 'a', amount: 4, qty: i % 2 === 0 ? 0 : 2 }));
    const delivered = records(events);
    // Only records with amount > 0 reach the division; the ones with amount 0 are filtered out first.
    events.forEach((e, i) => { if (i % 4 === 0) e.amount = 0; });
    const withAmounts = delivered.map((d, i) => ({ ...d, dataBase64: Buffer.from(JSON.stringify(events[i])).toString('base64') }));
    const r = await runOneShard(query((df) => unitPrice(df.filter(col('amount').gt(lit(0))))), withAmounts);
    expect(r.result.error).toBeUndefined();
    const blamed = new Set(r.deadLetters.records.map((d) => decoded(d.dataBase64)));
    expect([...blamed].every((e) => e.qty === 0 && e.amount === 4)).toBe(true);
    expect(r.deadLetters.records).toHaveLength(50);
    expect(r.sink.allRows()).toEqual([['a', 200, 100]]);
  });

  it('a late record with a zero divisor is dropped by the watermark, as in the batch run, not dead-lettered', async () => {
    const windowed = (df: DataFrame): DataFrame => df.withWatermark('ts', '10 minutes')
      .groupBy(window(col('ts'), '10 minutes'), col('k')).agg(sum(col('amount').divide(col('qty'))).as('unit'));
    const at = (minute: number): string => new Date(Date.UTC(2024, 4, 1, 12, minute)).toISOString();
    const definition = defineQuery({ name: 'late-bad', source: { schema: SCHEMA, partitionKey: 'k' }, transform: windowed, outputMode: 'update', sink: { kind: 'dynamodb' } });
    const backends = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new MemoryDeadLetterWriter() };
    const compiled = compileQuery(definition, { expectedShardCount: 1 });
    await runShardInvocation(compiled, { shardId: 's', records: records([{ k: 'a', amount: 1, qty: 1, ts: at(50) }]) }, backends);
    // Batch 1 runs with batch 0's watermark for late rows (none); batch 2 with 12:40.
    await runShardInvocation(compiled, { shardId: 's', records: records([{ k: 'a', amount: 1, qty: 1, ts: at(51) }]) }, backends);
    // So a row at 12:05 is late in batch 2; two on-time rows raise.
    const second = records([
      { k: 'a', amount: 1, qty: 0, ts: at(5) }, { k: 'a', amount: 2, qty: 0, ts: at(55) }, { k: 'a', amount: 3, qty: 1, ts: at(56) }, { k: 'a', amount: 5, qty: 0, ts: at(57) },
    ]);
    const result = await runShardInvocation(compiled, { shardId: 's', records: second }, backends);
    expect(result.error).toBeUndefined();
    expect(backends.deadLetters.records.map((d) => decoded(d.dataBase64).amount)).toEqual([2, 5]);
    expect(result.progress.at(-1)!.stateOperators[0]!.numRowsDroppedByWatermark).toBe(1);
  });

  it('a sum that overflows only with the records before it is still found by the search, beside 100 screened records', async () => {
    const events: Event[] = Array.from({ length: 300 }, (_, i) => ({ k: 'a', amount: 1, qty: i % 3 === 0 ? 0 : 1 }));
    events[298] = { k: 'a', amount: '9223372036854775807' as unknown as number, qty: 1 };
    const lines = events.map((e) => JSON.stringify(e).replace('"9223372036854775807"', '9223372036854775807'));
    const delivered = records(events).map((d, i) => ({ ...d, dataBase64: Buffer.from(lines[i]!).toString('base64') }));
    const r = await runOneShard(query((df) => df.groupBy(col('k')).agg(sum(col('amount')).as('s'), sum(col('amount').divide(col('qty'))).as('u'))), delivered);
    expect(r.result.error).toBeUndefined();
    // The sum of the records before it plus 2^63-1 is past int64: that record is the one blamed.
    const overflow = r.deadLetters.records.filter((d) => /^ARITHMETIC_OVERFLOW/.test(d.reason));
    expect(overflow.map((d) => d.sequenceNumber)).toEqual([delivered[298]!.sequenceNumber]);
    expect(r.deadLetters.records.filter((d) => /^DIVIDE_BY_ZERO/.test(d.reason))).toHaveLength(100);
  });
});

describe('stage 1 of a repartitioned aggregate (partial aggregation in the sink)', () => {
  it('150 zero divisors among 300 records: dead-lettered in stage 1, the internal stream carries only the good ones', async () => {
    // No partition-key column: the groups are spread over the source shards, so the aggregate is repartitioned.
    const definition = defineQuery({ name: 'spread', source: { schema: SCHEMA }, transform: unitPrice, outputMode: 'update', sink: { kind: 'dynamodb' } });
    const compiled = compileQuery(definition, { allowRepartition: true });
    const stage = compiled.sourceStage;
    expect(stage.outputHop?.partial).toBeTruthy();
    const channel = MemoryInternalStream.withShards(2);
    const backends = { checkpoint: new MemoryCheckpoint(), sink: RepartitionSink.forHop(stage.outputHop!, channel), deadLetters: new MemoryDeadLetterWriter() };
    const events = Array.from({ length: 300 }, (_, i): Event => ({ k: 'a', amount: 2, qty: i % 2 === 0 ? 0 : 1 }));
    const { value: result, runs } = await countingRuns(() => runShardInvocation(compiled, { shardId: 's', records: records(events) }, backends));
    expect(result.error).toBeUndefined();
    expect(backends.deadLetters.records).toHaveLength(150);
    expect(backends.deadLetters.records.every((d) => decoded(d.dataBase64).qty === 0 && /^DIVIDE_BY_ZERO/.test(d.reason))).toBe(true);
    expect(runs).toBeLessThanOrEqual(4);
    const sent = [...channel.records.values()].flat().map((r) => JSON.parse(Buffer.from(r.dataBase64, 'base64').toString()) as { rows: unknown[][] });
    expect(sent.flatMap((r) => r.rows)).toHaveLength(1);
  });
});
