import { describe, expect, it } from 'vitest';
import { defineQuery, type StreamingQueryDefinition } from '../../lib/query/query-definition.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { col, sum, window } from '../../lib/plan/functions.js';
import { MemoryDeadLetterWriter } from '../../lib/sources/dead-letter.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { runShardInvocation } from '../../lib/query/shard-invocation.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import type { PartitionBackends } from '../../lib/query/partition-backends.js';
import { formatTimestamp } from '../../lib/core/timestamps.js';
import { ManualClock } from '../../lib/runtime/clock.js';

const revenue = (outputMode: 'append' | 'update' | 'complete'): StreamingQueryDefinition => defineQuery({
  name: 'hourly-revenue',
  source: { schema: 'amount long, ts timestamp' },
  transform: (events) => events.withWatermark('ts', '15 minutes').groupBy(window(col('ts'), '1 hour')).agg(sum('amount').as('revenue')),
  outputMode,
  sink: { kind: 'dynamodb' },
});

/** A cold container: compiles the definition, then runs one invocation of the shard. */
async function invoke(
  request: { definition: StreamingQueryDefinition; shardId: string; records: ShardRecord[]; expectedShardCount?: number },
  b: PartitionBackends,
): ReturnType<typeof runShardInvocation> {
  const query = compileQuery(request.definition, { expectedShardCount: request.expectedShardCount });
  return runShardInvocation(query, request, b);
}

let sequence = 1000n;
function records(...events: (string | { amount: number; ts: string })[]): ShardRecord[] {
  return events.map((e) => ({
    sequenceNumber: String(sequence++ * 1_000_000_000_000_000n),
    partitionKey: 'p',
    dataBase64: Buffer.from(typeof e === 'string' ? e : JSON.stringify(e)).toString('base64'),
    approximateArrivalTimestampMs: 0,
  }));
}
const ev = (amount: number, hhmm: string) => ({ amount, ts: `2024-05-01T${hhmm}:00Z` });

function backends(): PartitionBackends & { sink: MemorySink; deadLetters: MemoryDeadLetterWriter } {
  return { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new MemoryDeadLetterWriter() };
}

const show = (rows: unknown[][]): string[] => rows.map((r) => {
  const w = r[0] as { start: number; end: number };
  return `${formatTimestamp(w.start)}-${formatTimestamp(w.end).slice(11)}=${String(r[1])}`;
});

describe('runShardInvocation (memory backends)', () => {
  it('seed 003 in append mode: the [14:00,15:00) window is emitted once the watermark passes it', async () => {
    const b = backends();
    const first = records(ev(15, '14:40'), ev(10, '14:30'), ev(30, '15:10'));
    const r1 = await invoke({ definition: revenue('append'), shardId: 'shard-0', records: first, expectedShardCount: 1 }, b);
    expect(r1.error).toBeUndefined();
    expect(r1.firstUncommittedSequenceNumber).toBeNull();
    expect(show(b.sink.allRows())).toEqual([]);
    const r2 = await invoke({ definition: revenue('append'), shardId: 'shard-0', records: records(ev(20, '15:20')), expectedShardCount: 1 }, b);
    expect(r2.error).toBeUndefined();
    // The data batch moves the watermark to 15:05; the no-data batch in the same invocation emits.
    expect(show(b.sink.allRows())).toEqual(['2024-05-01 14:00:00-15:00:00=25']);
    expect(r2.progress.map((p) => p.numInputRows)).toEqual([1, 0]);
  });

  it('runs a no-data batch only when the watermark reaches a group held (not on every movement)', async () => {
    const b = backends();
    const run = async (...events: { amount: number; ts: string }[]) => (await invoke({ definition: revenue('append'), shardId: 's', records: records(...events), expectedShardCount: 1 }, b)).progress.map((p) => p.numInputRows);
    expect(await run(ev(1, '14:10'))).toEqual([1]);
    // Watermark 13:55 → 14:15 → 14:40: the 14:00–15:00 window is not due, no no-data batch.
    expect(await run(ev(2, '14:30'))).toEqual([1]);
    expect(await run(ev(3, '14:55'))).toEqual([1]);
    expect(show(b.sink.allRows())).toEqual([]);
    // Watermark 15:05: the window is due, the no-data batch emits it, and nothing more is held
    // before 16:00, so the next movement (15:25) runs none.
    expect(await run(ev(4, '15:20'))).toEqual([1, 0]);
    expect(show(b.sink.allRows())).toEqual(['2024-05-01 14:00:00-15:00:00=6']);
    expect(await run(ev(5, '15:40'))).toEqual([1]);
  });

  it('drops redelivered records that are already committed', async () => {
    const b = backends();
    const batch = records(ev(15, '14:40'), ev(10, '14:30'));
    await invoke({ definition: revenue('update'), shardId: 's', records: batch, expectedShardCount: 1 }, b);
    const again = await invoke({ definition: revenue('update'), shardId: 's', records: [...batch, ...records(ev(5, '14:50'))], expectedShardCount: 1 }, b);
    // The watermark moved (14:25 → 14:35) but no group ends by then: Spark's rule would add a
    // no-data batch; the deployed runtime runs one only when something is due.
    expect(again.progress.map((p) => p.numInputRows)).toEqual([1]);
    expect(show(b.sink.rowsAfter(0))).toEqual(['2024-05-01 14:00:00-15:00:00=30']);
  });

  it('dead-letters undecodable records with the reason and counts them, without blocking', async () => {
    const b = backends();
    const batch = records(ev(15, '14:40'), 'not json', { amount: 'x' as unknown as number, ts: '2024-05-01T14:00:00Z' });
    const r = await invoke({ definition: revenue('update'), shardId: 's', records: batch, expectedShardCount: 1 }, b);
    expect(r.error).toBeUndefined();
    expect(r.firstUncommittedSequenceNumber).toBeNull();
    expect(b.deadLetters.records.map((d) => d.sequenceNumber)).toEqual([batch[1]!.sequenceNumber, batch[2]!.sequenceNumber]);
    expect(b.deadLetters.records[0]!.reason).toMatch(/malformed JSON/);
    expect(b.deadLetters.records[1]!.reason).toMatch(/amount/);
    expect(r.progress[0]!.numDeadLetteredRows).toBe(2);
    expect(r.progress[0]!.numInputRows).toBe(1);
  });

  it('a failing sink leaves the batch uncommitted and the retry re-runs it exactly', async () => {
    const b = backends();
    let failures = 1;
    const flaky = { ...b, sink: Object.assign(Object.create(b.sink), {
      addBatch: async (batch: Parameters<MemorySink['addBatch']>[0]) => {
        if (failures-- > 0) throw new Error('throttled');
        return b.sink.addBatch(batch);
      },
    }) as MemorySink };
    const batch = records(ev(15, '14:40'), ev(10, '14:30'));
    const r1 = await invoke({ definition: revenue('update'), shardId: 's', records: batch, expectedShardCount: 1 }, flaky);
    expect(r1.error?.message).toMatch(/throttled/);
    expect(r1.firstUncommittedSequenceNumber).toBe(batch[0]!.sequenceNumber);
    // The retry delivers only the first half (a bisected retry) and more records can't join batch 0.
    const r2 = await invoke({ definition: revenue('update'), shardId: 's', records: batch.slice(0, 1), expectedShardCount: 1 }, {
      ...flaky,
      shardReader: { read: async (_shard, first, last) => batch.filter((x) => BigInt(x.sequenceNumber) >= BigInt(first) && BigInt(x.sequenceNumber) <= BigInt(last)) },
    });
    expect(r2.error).toBeUndefined();
    expect(r2.progress[0]!.batchId).toBe(0);
    expect(r2.progress[0]!.numInputRows).toBe(2);
    expect(show(b.sink.allRows())).toEqual(['2024-05-01 14:00:00-15:00:00=25']);
  });

  describe('a planned batch whose records expired from the stream', () => {
    /** Batch 0 planned over `batch`, its sink write failed: planned, not committed. */
    async function plannedNotCommitted(batch: ShardRecord[]) {
      const b = backends();
      let failing = true;
      const revisions: (number | undefined)[] = [];
      const flaky = { ...b, sink: Object.assign(Object.create(b.sink), {
        addBatch: async (sinkBatch: Parameters<MemorySink['addBatch']>[0]) => {
          if (failing) throw new Error('throttled');
          revisions.push(sinkBatch.revision);
          return b.sink.addBatch(sinkBatch);
        },
      }) as MemorySink };
      const r = await invoke({ definition: revenue('update'), shardId: 's', records: batch, expectedShardCount: 1 }, flaky);
      expect(r.error?.message).toMatch(/throttled/);
      failing = false;
      return { b, flaky, revisions };
    }
    const holding = (held: ShardRecord[]) => ({
      read: async (_shard: string, first: string, last: string) => held.filter((x) => BigInt(x.sequenceNumber) >= BigInt(first) && BigInt(x.sequenceNumber) <= BigInt(last)),
    });

    it('runs over the records still held when retention took its first ones, records the loss and keeps its planned end', async () => {
      const batch = records(ev(15, '14:40'), ev(10, '14:30'), ev(7, '14:50'));
      const { b, flaky } = await plannedNotCommitted(batch);
      const losses: unknown[] = [];
      const later = records(ev(1, '14:55'));
      const r = await invoke({ definition: revenue('update'), shardId: 's', records: later, expectedShardCount: 1 }, {
        ...flaky, shardReader: holding(batch.slice(2)), recordExpiredRecords: async (loss) => { losses.push(loss); return loss; },
      });
      expect(r.error).toBeUndefined();
      expect(losses).toEqual([{
        shardId: 's', batchId: 0, firstSequenceNumber: batch[0]!.sequenceNumber,
        lastSequenceNumber: String(BigInt(batch[2]!.sequenceNumber) - 1n), count: 2,
      }]);
      expect(r.progress.map((p) => [p.batchId, p.numInputRows])).toEqual([[0, 1], [1, 1]]);
      expect(r.committed?.sequenceNumber).toBe(later[0]!.sequenceNumber);
      expect(show(b.sink.allRows()).at(-1)).toBe('2024-05-01 14:00:00-15:00:00=8');
    });

    it('runs empty when all its records expired', async () => {
      const batch = records(ev(15, '14:40'), ev(10, '14:30'));
      const { flaky } = await plannedNotCommitted(batch);
      const losses: { count: number; lastSequenceNumber: string }[] = [];
      const later = records(ev(1, '14:55'));
      const r = await invoke({ definition: revenue('update'), shardId: 's', records: later, expectedShardCount: 1 }, {
        ...flaky, shardReader: holding([]), recordExpiredRecords: async (loss) => { losses.push(loss); return loss; },
      });
      expect(r.error).toBeUndefined();
      expect(losses).toMatchObject([{ count: 2, lastSequenceNumber: batch[1]!.sequenceNumber }]);
      expect(r.committed?.sequenceNumber).toBe(later[0]!.sequenceNumber);
    });

    it('decides the expired prefix from the shard read alone: a delivered record before a gap in the read is no trim', async () => {
      // Planned b0..b3; the retried delivery holds b1, the (trimmed) shard read holds b3: b2 is in neither.
      const batch = records(ev(15, '14:40'), ev(10, '14:30'), ev(7, '14:50'), ev(3, '14:20'));
      const { b, flaky, revisions } = await plannedNotCommitted(batch);
      const losses: { count: number; firstSequenceNumber: string; lastSequenceNumber: string }[] = [];
      const r = await invoke({ definition: revenue('update'), shardId: 's', records: [batch[1]!], expectedShardCount: 1 }, {
        ...flaky, shardReader: holding([batch[3]!]), recordExpiredRecords: async (loss) => { losses.push(loss); return loss; },
      });
      expect(r.error).toBeUndefined();
      // b0..b2 are recorded lost (b1 too, though delivered), and the batch ran over b3 alone.
      expect(losses).toMatchObject([{ firstSequenceNumber: batch[0]!.sequenceNumber, lastSequenceNumber: String(BigInt(batch[3]!.sequenceNumber) - 1n), count: 3 }]);
      expect(r.progress.map((p) => [p.batchId, p.numInputRows])).toEqual([[0, 1]]);
      expect(show(b.sink.allRows())).toEqual(['2024-05-01 14:00:00-15:00:00=3']);
      // The sink is told which run this is (3 records lost), so a stale run of the batch cannot replace it.
      expect(revisions).toEqual([3]);
    });

    it('a delivered record after the read\'s first that the read lacks is a gap, not a trim', async () => {
      const batch = records(ev(15, '14:40'), ev(10, '14:30'), ev(7, '14:50'), ev(3, '14:20'));
      const { flaky } = await plannedNotCommitted(batch);
      const losses: unknown[] = [];
      const r = await invoke({ definition: revenue('update'), shardId: 's', records: [batch[2]!], expectedShardCount: 1 }, {
        ...flaky, shardReader: holding([batch[1]!, batch[3]!]), recordExpiredRecords: async (loss) => { losses.push(loss); return loss; },
      });
      expect(r.error?.message).toMatch(/no longer holds all its planned records/);
      expect(losses).toEqual([]);
    });

    it('leaves out as many records as the loss record holds when another attempt saw a later trim', async () => {
      const batch = records(ev(15, '14:40'), ev(10, '14:30'), ev(7, '14:50'));
      const { b, flaky } = await plannedNotCommitted(batch);
      // This attempt's read still holds b1 and b2; the record (another attempt's) says b0 and b1 are lost.
      const r = await invoke({ definition: revenue('update'), shardId: 's', records: [], expectedShardCount: 1 }, {
        ...flaky, shardReader: holding(batch.slice(1)),
        recordExpiredRecords: async (loss) => ({ ...loss, lastSequenceNumber: String(BigInt(batch[2]!.sequenceNumber) - 1n), count: 2 }),
      });
      expect(r.error).toBeUndefined();
      expect(r.progress.map((p) => [p.batchId, p.numInputRows])).toEqual([[0, 1]]);
      expect(show(b.sink.allRows())).toEqual(['2024-05-01 14:00:00-15:00:00=7']);
    });

    it('still fails when records are missing other than from the start, or the loss cannot be recorded', async () => {
      const batch = records(ev(15, '14:40'), ev(10, '14:30'), ev(7, '14:50'));
      const { flaky } = await plannedNotCommitted(batch);
      const losses: unknown[] = [];
      const gap = await invoke({ definition: revenue('update'), shardId: 's', records: [], expectedShardCount: 1 }, {
        ...flaky, shardReader: holding([batch[0]!, batch[2]!]), recordExpiredRecords: async (loss) => { losses.push(loss); return loss; },
      });
      expect(gap.error?.message).toMatch(/no longer holds all its planned records/);
      const unrecorded = await invoke({ definition: revenue('update'), shardId: 's', records: [], expectedShardCount: 1 }, {
        ...flaky, shardReader: holding(batch.slice(1)),
      });
      expect(unrecorded.error?.message).toMatch(/no longer holds all its planned records/);
      expect(losses).toEqual([]);
    });
  });

  it('refuses a stateful query on a multi-shard stream without a declared partition key', async () => {
    await expect(invoke({ definition: revenue('update'), shardId: 's', records: [] }, backends()))
      .rejects.toThrow(/STATE_NOT_CO_PARTITIONED|partial result[\s\S]*How to fix: .*partitionKey/);
  });
});

describe('progress rates across invocations', () => {
  it('the first batch of an invocation measures its input rate from the previous batch\'s timestamp in the offset log', async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const b = { ...backends(), clock };
    const run = async (...events: { amount: number; ts: string }[]) =>
      (await invoke({ definition: revenue('update'), shardId: 's', records: records(...events), expectedShardCount: 1 }, b)).progress;
    const first = await run(ev(1, '14:10'), ev(2, '14:11'));
    clock.advance(4000);
    const second = await run(ev(3, '14:12'), ev(4, '14:13'), ev(5, '14:14'), ev(6, '14:15'), ev(7, '14:16'), ev(8, '14:17'));
    // A fresh StreamExecution per invocation: Spark's restart would report 0 again.
    expect(first.map((p) => p.inputRowsPerSecond)).toEqual([0]);
    expect(second.map((p) => [p.batchId, p.numInputRows, p.inputRowsPerSecond])).toEqual([[1, 6, 1.5]]);
  });

  it('a re-run batch measures from batch N-1, not from its failed attempt', async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const b = { ...backends(), clock };
    await invoke({ definition: revenue('update'), shardId: 's', records: records(ev(1, '14:10')), expectedShardCount: 1 }, b);
    clock.advance(2000);
    const failing = records(ev(2, '14:11'), ev(3, '14:12'));
    const sink = b.sink;
    const broken = { ...b, sink: Object.assign(Object.create(Object.getPrototypeOf(sink) as object) as MemorySink, sink, { addBatch: () => Promise.reject(new Error('sink down')) }) };
    const failed = await invoke({ definition: revenue('update'), shardId: 's', records: failing, expectedShardCount: 1 }, broken);
    expect(failed.error).toBeDefined();
    clock.advance(2000);
    const rerun = await invoke({ definition: revenue('update'), shardId: 's', records: failing, expectedShardCount: 1 }, b);
    expect(rerun.error).toBeUndefined();
    expect(rerun.progress.map((p) => [p.batchId, p.numInputRows, p.inputRowsPerSecond])).toEqual([[1, 2, 0.5]]);
  });
});
