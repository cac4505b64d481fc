/**
 * Issue 11, stage 2: partial aggregates whose merge overflows a long sum in stage 2's aggregate
 * are found by the same search as a one-stage query's failing records (lib/query/data-error-search.ts),
 * one row of the internal stream at a time, bounded by the invocation's deadline and resumed from
 * the stage-2 partition's blame entry. Before, stage 2 could not hold anything back: the batch
 * failed on every retry. Through runShardInvocation on memory backends; the emulator test
 * (test/aws/stage2-data-errors.integration.test.ts) runs the real handlers.
 */
import { describe, expect, it } from 'vitest';
import { col, count, sum } from '../../lib/plan/functions.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { MemoryDeadLetterWriter } from '../../lib/sources/dead-letter.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { RepartitionSink } from '../../lib/sinks/repartition-sink.js';
import { runShardInvocation, type ShardInvocationResult } from '../../lib/query/shard-invocation.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { decodeRepartitionRecord } from '../../lib/sources/repartition-records.js';
import type { InvocationLimits } from '../../lib/query/invocation-limits.js';
import { MemoryInternalStream } from '../support/memory-internal-stream.js';
import { countingRuns, CountingDeadLetters, deadlineAfter } from '../support/data-error-runs.js';

const B = 2n ** 62n;
const query = compileQuery(defineQuery({
  name: 'stage2-overflows', source: { schema: 'k string, amount long' },
  transform: (df) => df.groupBy(col('k')).agg(sum(col('amount')).as('total'), count('*').as('n')),
  outputMode: 'update', sink: { kind: 'dynamodb', keyColumns: ['k'] },
}), { allowRepartition: true });
const [stage1, stage2] = query.stages;
const KEYS = ['a', 'b', 'c'];

/**
 * `triples` rounds of three stage-1 batches: per key +2^62, +2^62, -(2^62 - 1), each as two records
 * (so stage 1 sends partials). The second batch's partials overflow when stage 2 merges them.
 */
function stage1Batches(triples: number): string[][] {
  const batches: string[][] = [];
  const halves = (amount: bigint): bigint[] => [amount / 2n, amount - amount / 2n];
  for (let t = 0; t < triples; t++) {
    for (const amount of [B, B, -(B - 1n)]) batches.push(KEYS.flatMap((k) => halves(amount).map((a) => `{"k":"${k}","amount":${a}}`)));
  }
  return batches;
}

/** Runs stage 1 over each batch in turn (one invocation each): the internal stream's records. */
async function internalRecords(batches: readonly string[][]): Promise<ShardRecord[]> {
  const internal = MemoryInternalStream.withShards(1);
  const backends = { checkpoint: new MemoryCheckpoint(), sink: RepartitionSink.forHop(stage1!.outputHop!, internal), deadLetters: new MemoryDeadLetterWriter() };
  let seq = 1000;
  for (const batch of batches) {
    const records = batch.map((data) => ({ sequenceNumber: String(seq++), partitionKey: 'p', dataBase64: Buffer.from(data).toString('base64'), approximateArrivalTimestampMs: 0 }));
    const result = await runShardInvocation(query, { shardId: 'src-0', records, stage: stage1 }, backends);
    expect(result.error).toBeUndefined();
  }
  return internal.records.get('internal-0')!;
}

/** Stage 2's invocations as Lambda retries them: from the first uncommitted record, until all are committed. */
async function invokeStage2(delivered: readonly ShardRecord[], limits: () => InvocationLimits | undefined, max: number) {
  const backends = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new CountingDeadLetters() };
  const results: ShardInvocationResult[] = [];
  let from = 0;
  while (from < delivered.length && results.length < max) {
    const l = limits();
    const result = await runShardInvocation(query, { shardId: 'internal-0', records: delivered.slice(from), stage: stage2, ...(l ? { limits: l } : {}) }, backends);
    results.push(result);
    const next = result.firstUncommittedSequenceNumber;
    from = next === null ? delivered.length : delivered.findIndex((r) => r.sequenceNumber === next);
  }
  return { results, ...backends };
}

describe('stage 2: 60 partial aggregates overflowing a long sum while merged, in one batch', () => {
  const culpritBatches = new Set(Array.from({ length: 20 }, (_, t) => 3 * t + 1));

  it('each is dead-lettered once with its provenance; the rest commits, also when the deadline stops the search and retries resume it', async () => {
    const delivered = await internalRecords(stage1Batches(20));
    expect(delivered).toHaveLength(60);
    expect(decodeRepartitionRecord(Buffer.from(delivered[0]!.dataBase64, 'base64')).partial).toBe(true);

    const inOne = await countingRuns(() => invokeStage2(delivered, () => undefined, 1));
    const withDeadline = await countingRuns(() => invokeStage2(delivered, () => deadlineAfter(40), 50));
    for (const { value: run } of [inOne, withDeadline]) {
      expect(run.results.every((r) => r.error === undefined)).toBe(true);
      expect(run.results.at(-1)!.firstUncommittedSequenceNumber).toBeNull();
      const letters = run.deadLetters.records.map((l) => decodeRepartitionRecord(Buffer.from(l.dataBase64, 'base64')));
      expect(letters.map((r) => `${r.batch}:${String(r.rows[0]![1])}`).sort())
        .toEqual([...culpritBatches].flatMap((b) => KEYS.map((k) => `${b}:${k}`)).sort());
      expect(run.deadLetters.records.every((l) => /^ARITHMETIC_OVERFLOW: .*on source partition src-0/s.test(l.reason))).toBe(true);
      // Every dead letter written once: a resumed search does not find (and write) a row again.
      expect([...run.deadLetters.writes.values()].every((n) => n === 1)).toBe(true);
      // Per key: 20 × (2^62 - (2^62 - 1)), from 40 partials of two records each.
      expect(run.sink.allRows().map((r) => [r[0], BigInt(r[1] as number | bigint), r[2]]).sort())
        .toEqual(KEYS.map((k) => [k, 20n, 80]));
    }
    expect(inOne.value.results).toHaveLength(1);
    const stopped = withDeadline.value.results.filter((r) => r.stoppedBy === 'deadline');
    expect(stopped.length).toBeGreaterThanOrEqual(2);
    expect(stopped.every((r) => r.committed === null)).toBe(true);
    // Bounded: the runs in one go spread over the invocations, at most a couple more per resume.
    expect(withDeadline.runs).toBeLessThanOrEqual(inOne.runs + 2 * withDeadline.value.results.length);
  });
});

describe('stage 2 of a stream-stream join: a condition raising for a pair whose other side is in state', () => {
  const join = compileQuery(defineQuery({
    name: 'pairs',
    sources: { orders: { schema: 'order_id string, amount long' }, payments: { schema: 'ref string, paid long' } },
    // Both sides in the condition: only a pair can raise (a zero `paid`).
    transform: ({ orders, payments }) => orders!.join(payments!, col('order_id').eq(col('ref')).and(col('amount').divide(col('paid')).gt(0))),
    outputMode: 'append', sink: { kind: 's3-files' },
  }), { allowRepartition: true });
  const joinStage = join.stages.find((s) => s.reads === 'internal-stream')!;
  const internal = MemoryInternalStream.withShards(1);
  let seq = 5000;
  const sendFrom = async (source: string, rows: readonly object[]): Promise<void> => {
    const stage = join.sourceStageOf(source);
    const records = rows.map((r) => ({ sequenceNumber: String(seq++), partitionKey: 'p', dataBase64: Buffer.from(JSON.stringify(r)).toString('base64'), approximateArrivalTimestampMs: 0 }));
    const backends = { checkpoint: new MemoryCheckpoint(), sink: RepartitionSink.forHop(stage.outputHop!, internal, undefined, stage.hopInput), deadLetters: new MemoryDeadLetterWriter() };
    expect((await runShardInvocation(join, { shardId: 'src-0', records, stage }, backends)).error).toBeUndefined();
  };

  it('the raising side\'s row (here the new payment, not the order in state) is held out and dead-lettered; the rest joins', async () => {
    const backends = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new MemoryDeadLetterWriter() };
    const runJoin = () => runShardInvocation(join, { shardId: 'internal-0', records: internal.records.get('internal-0')!, stage: joinStage }, backends);
    await sendFrom('orders', [{ order_id: 'o1', amount: 10 }, { order_id: 'o2', amount: 20 }]);
    expect((await runJoin()).error).toBeUndefined();
    // The orders are in the join's state now; the payments arrive in a batch of their own.
    await sendFrom('payments', [{ ref: 'o1', paid: 0 }, { ref: 'o2', paid: 5 }]);
    const result = await runJoin();
    expect(result.error).toBeUndefined();
    expect(result.firstUncommittedSequenceNumber).toBeNull();
    expect(backends.sink.allRows()).toEqual([['o2', 20, 'o2', 5]]);
    const letters = backends.deadLetters.records;
    expect(letters.map((l) => decodeRepartitionRecord(Buffer.from(l.dataBase64, 'base64'))).map((r) => [r.in, r.rows])).toEqual([['payments', [['o1', 0]]]]);
    expect(letters[0]!.reason).toMatch(/^DIVIDE_BY_ZERO: .*on source partition payments\.src-0/s);
  });
});
