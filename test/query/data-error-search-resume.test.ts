/**
 * Issue 11: data errors the per-record screen cannot pin on one record (a long sum past int64 needs
 * the records before it) are found by a search, one record at a time. The search is bounded by the
 * invocation's remaining time, not by a count (it was 64 per batch, and a batch with more failed on
 * every retry), and a retry resumes it from the checkpoint's blame entry instead of finding the
 * same records again. Here through runShardInvocation on the in-memory backends; the emulator
 * test (test/aws/many-overflows.integration.test.ts) runs the real handler.
 */
import { describe, expect, it } from 'vitest';
import { col, count, sum } from '../../lib/plan/functions.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { BATCH_BLAME_FORMAT_VERSION } from '../../lib/checkpoint/batch-blame-log.js';
import type { MemoryDeadLetterWriter } from '../../lib/sources/dead-letter.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { runShardInvocation, type ShardInvocationResult } from '../../lib/query/shard-invocation.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import type { InvocationLimits } from '../../lib/query/invocation-limits.js';
import { countingRuns, CountingDeadLetters, deadlineAfter } from '../support/data-error-runs.js';

const B = 2n ** 62n;
const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);

const compiled = compileQuery(defineQuery({
  name: 'overflows', source: { schema: 'k string, amount long', partitionKey: 'k' },
  transform: (df) => df.groupBy(col('k')).agg(sum(col('amount')).as('total'), count('*').as('n')),
  outputMode: 'update', sink: { kind: 'dynamodb', keyColumns: ['k'] },
}), { expectedShardCount: 1 });

interface Event { k: string; amount: bigint }

/**
 * Per key: +2^62, +2^62, -(2^62 - 1), ...: the second of each three overflows the running sum
 * (2^63 > int64), so `triples` records per key fail the batch, each only with the ones before it.
 */
function overflowingEvents(triples: number, keys: readonly string[]): Event[] {
  const events: Event[] = [];
  for (let t = 0; t < triples; t++) {
    for (const k of keys) events.push({ k, amount: B }, { k, amount: B }, { k, amount: -(B - 1n) });
  }
  return events;
}

let sequence = 5000n;
function shardRecords(events: readonly Event[]): ShardRecord[] {
  return events.map((e) => ({
    sequenceNumber: String(sequence++ * 1_000_000n), partitionKey: e.k, approximateArrivalTimestampMs: 0,
    // Written by hand: JSON.stringify has no bigint, and the values are beyond 2^53.
    dataBase64: Buffer.from(`{"k":"${e.k}","amount":${e.amount}}`).toString('base64'),
  }));
}

/** Spark's answer in one batch: the records that overflow the running sum withheld, in shard order. */
function expectedRun(events: readonly Event[]): { culprits: Set<number>; totals: Map<string, [bigint, number]> } {
  const culprits = new Set<number>();
  const totals = new Map<string, [bigint, number]>();
  events.forEach((e, i) => {
    const [s, n] = totals.get(e.k) ?? [0n, 0];
    const next = s + e.amount;
    if (next > INT64_MAX || next < INT64_MIN) culprits.add(i);
    else totals.set(e.k, [next, n + 1]);
  });
  return { culprits, totals };
}

/** Lambda's retries: the records from the first uncommitted one, until all are committed or `max` invocations ran. */
async function invokeUntilCommitted(delivered: readonly ShardRecord[], backends: { checkpoint: MemoryCheckpoint; sink: MemorySink; deadLetters: MemoryDeadLetterWriter }, limits: () => InvocationLimits, max: number) {
  const results: ShardInvocationResult[] = [];
  let from = 0;
  while (from < delivered.length && results.length < max) {
    const result = await runShardInvocation(compiled, { shardId: 's', records: delivered.slice(from), limits: limits() }, backends);
    results.push(result);
    const next = result.firstUncommittedSequenceNumber;
    from = next === null ? delivered.length : delivered.findIndex((r) => r.sequenceNumber === next);
  }
  return results;
}

const sinkTotals = (sink: MemorySink): Map<string, [bigint, number]> => new Map(sink.allRows().map((row) => [row[0] as string, [BigInt(row[1] as number | bigint), row[2] as number]]));

describe('a batch with more failing records than one search finds (a long sum past int64, 150 times)', () => {
  const events = overflowingEvents(50, ['a', 'b', 'c']);
  const { culprits, totals } = expectedRun(events);

  it('all 150 are dead-lettered with ARITHMETIC_OVERFLOW and the rest commits, in one invocation without a deadline', async () => {
    expect(culprits.size).toBe(150);
    const delivered = shardRecords(events);
    const backends = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new CountingDeadLetters() };
    const { value: result } = await countingRuns(() => runShardInvocation(compiled, { shardId: 's', records: delivered }, backends));
    expect(result.error).toBeUndefined();
    expect(result.firstUncommittedSequenceNumber).toBeNull();
    expect(backends.deadLetters.records.map((d) => d.sequenceNumber).sort()).toEqual(delivered.filter((_, i) => culprits.has(i)).map((d) => d.sequenceNumber).sort());
    expect(backends.deadLetters.records.every((d) => /^ARITHMETIC_OVERFLOW: \[ARITHMETIC_OVERFLOW\] long overflow/.test(d.reason))).toBe(true);
    expect(sinkTotals(backends.sink)).toEqual(totals);
    expect(result.progress.at(-1)!.numDeadLetteredRows).toBe(150);
    // Committed: no blame entry is left behind.
    expect(backends.checkpoint.blameLog.size).toBe(0);
  });

  it('stopped by the deadline, each retry resumes the search: every culprit found (and dead-lettered) once, the shard committed in a bounded number of invocations', async () => {
    const delivered = shardRecords(events);
    const unbounded = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new CountingDeadLetters() };
    const { runs: runsInOne } = await countingRuns(() => runShardInvocation(compiled, { shardId: 's', records: delivered }, unbounded));

    const backends = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new CountingDeadLetters() };
    const perInvocation = 200;
    const { value: results, runs } = await countingRuns(() => invokeUntilCommitted(delivered, backends, () => deadlineAfter(perInvocation), 40));
    const last = results.at(-1)!;
    expect(last.firstUncommittedSequenceNumber).toBeNull();
    expect(results.every((r) => r.error === undefined)).toBe(true);
    // Every invocation but the last stopped cleanly before its deadline, the batch uncommitted.
    expect(results.slice(0, -1).every((r) => r.stoppedBy === 'deadline' && r.committed === null)).toBe(true);
    expect(results.length).toBeGreaterThan(2);
    // Bounded: the runs of the search in one go, spread over invocations, plus at most 2 per resume.
    expect(results.length).toBeLessThanOrEqual(Math.ceil(runsInOne / (perInvocation - 3)) + 1);
    expect(runs).toBeLessThanOrEqual(runsInOne + 2 * results.length);
    // Not redone: each culprit's dead letter was written once, across all the invocations.
    expect([...backends.deadLetters.writes.values()].every((n) => n === 1)).toBe(true);
    expect(backends.deadLetters.records.map((d) => d.sequenceNumber).sort()).toEqual(unbounded.deadLetters.records.map((d) => d.sequenceNumber).sort());
    expect(sinkTotals(backends.sink)).toEqual(totals);
  });

  it('a blame entry of another plan of the batch id (other end offsets) is not inherited', async () => {
    const delivered = shardRecords(events.slice(0, 9));
    const backends = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new CountingDeadLetters() };
    // Batch 0 planned differently: it names the first record (which fails nothing) as withheld.
    await backends.checkpoint.blameLog.put({
      formatVersion: BATCH_BLAME_FORMAT_VERSION, batchId: 0, offsets: { kinesis: { sequenceNumber: '1' } },
      withheld: [[delivered[0]!.sequenceNumber, 'ARITHMETIC_OVERFLOW: from another plan']], passingThrough: delivered[0]!.sequenceNumber, screened: true,
    });
    const result = await runShardInvocation(compiled, { shardId: 's', records: delivered }, backends);
    expect(result.firstUncommittedSequenceNumber).toBeNull();
    expect(backends.deadLetters.records.map((d) => d.sequenceNumber)).toEqual([delivered[1]!, delivered[4]!, delivered[7]!].map((d) => d.sequenceNumber));
    expect(sinkTotals(backends.sink)).toEqual(new Map([['a', [1n, 2]], ['b', [1n, 2]], ['c', [1n, 2]]]));
  });
});
