/**
 * Issue 11 part 1 in memory: a result row the sink refuses (here a memory sink with a size limit)
 * dead-letters exactly the batch's records the row cannot take (in record order, each record the
 * row is unstorable with), the batch runs without them, and the group keeps the largest storable
 * value; the group's other records and every other row are written, nothing is retried.
 */
import { describe, expect, it, vi } from 'vitest';
import { defineQuery } from '../../lib/query/query-definition.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { col, collect_list, window } from '../../lib/plan/functions.js';
import { MemoryDeadLetterWriter } from '../../lib/sources/dead-letter.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import type { SinkRowLimits } from '../../lib/sinks/sink.js';
import { runShardInvocation } from '../../lib/query/shard-invocation.js';
import { GuardedSink } from '../../lib/query/unwritable-rows.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import type { PartitionBackends } from '../../lib/query/partition-backends.js';
import { SluiceError } from '../../lib/errors/sluice-error.js';

/** A memory sink that refuses rows whose values print longer than `limit` (60) characters. */
class SmallRowSink extends MemorySink {
  writes = 0;
  constructor(private readonly limit = 60) {
    super();
  }

  readonly rowLimits: SinkRowLimits = {
    rowKey: (batch, i) => JSON.stringify(batch.rows[i]!.slice(0, 2)),
    check: (batch, i) => {
      const size = JSON.stringify(batch.rows[i]![2]).length;
      return size > this.limit ? { code: 'SINK_ITEM_TOO_LARGE', reason: `the row is ${size} characters, over the sink's ${this.limit}` } : null;
    },
  };

  override async addBatch(batch: Parameters<MemorySink['addBatch']>[0]): Promise<void> {
    this.writes++;
    await super.addBatch(batch);
  }
}

const notes = (outputMode: 'update' | 'complete') => compileQuery(defineQuery({
  name: `notes-${outputMode}`,
  source: { schema: 'k string, note string, ts timestamp' },
  transform: (events) => events.withWatermark('ts', '1 hour').groupBy(window(col('ts'), '1 hour'), col('k')).agg(collect_list('note').as('notes')),
  outputMode,
  sink: { kind: 'dynamodb' },
}), { expectedShardCount: 1 });

let sequence = 7000n;
function records(...events: [string, string][]): ShardRecord[] {
  return events.map(([k, note]) => ({
    sequenceNumber: String(sequence++ * 1_000_000_000n),
    partitionKey: k,
    dataBase64: Buffer.from(JSON.stringify({ k, note, ts: '2024-05-01T14:10:00Z' })).toString('base64'),
    approximateArrivalTimestampMs: 0,
  }));
}

const latestNotes = (sink: MemorySink): Record<string, unknown> =>
  Object.fromEntries(sink.allRows().map((r) => [r[1] as string, r[2]]));

describe.each(['update', 'complete'] as const)('a row the sink refuses (%s mode)', (mode) => {
  it('dead-letters the records that change it, runs the batch without them, and writes everything else', async () => {
    const query = notes(mode);
    const sink = new SmallRowSink();
    const deadLetters = new MemoryDeadLetterWriter();
    const b: PartitionBackends = { checkpoint: new MemoryCheckpoint(), sink, deadLetters };
    const first = await runShardInvocation(query, { shardId: 's', records: records(['a', 'a1'], ['b', 'b1']) }, b);
    expect(first.error).toBeUndefined();

    const big = 'x'.repeat(60);
    const second = records(['b', 'b2'], ['a', big], ['c', 'c1'], ['a', 'a2'], ['b', 'b3']);
    const writesBefore = sink.writes;
    const result = await runShardInvocation(query, { shardId: 's', records: second }, b);
    expect(result.error).toBeUndefined();
    expect(result.firstUncommittedSequenceNumber).toBeNull();
    // Both of this batch's records for 'a' change its row (a collect_list); only the one it cannot take is a dead letter.
    expect(deadLetters.records.map((l) => l.sequenceNumber)).toEqual([second[1]!.sequenceNumber]);
    expect(deadLetters.records.map((l) => l.reason)).toEqual([expect.stringMatching(/^SINK_ITEM_TOO_LARGE: the row is \d+ characters, over the sink's 60$/)]);
    // 'a' keeps what fits; the other groups have all their records.
    expect(latestNotes(sink)).toEqual({ a: ['a1', 'a2'], b: ['b1', 'b2', 'b3'], c: ['c1'] });
    // Probes never reach the sink: one write per committed batch.
    expect(sink.writes - writesBefore).toBe(result.progress.length);
    expect(result.progress[0]).toMatchObject({ numInputRows: 4, numDeadLetteredRows: 1 });
  });

  it('a refused row: only the record it cannot take is dead-lettered, not the storable record of its group beside it', async () => {
    const query = notes(mode);
    const sink = new SmallRowSink();
    const deadLetters = new MemoryDeadLetterWriter();
    const b: PartitionBackends = { checkpoint: new MemoryCheckpoint(), sink, deadLetters };
    const batch = records(...Array.from({ length: 9 }, (_, i): [string, string] => [`k${i}`, `n${i}`]), ['k4', 'y'.repeat(70)]);
    const result = await runShardInvocation(query, { shardId: 's', records: batch }, b);
    expect(result.error).toBeUndefined();
    // k4's small record alone makes a storable row: it stays (it used to be dead-lettered with the big one).
    expect(deadLetters.records.map((l) => l.sequenceNumber)).toEqual([batch[9]!.sequenceNumber]);
    expect(latestNotes(sink)).toEqual(Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`k${i}`, [`n${i}`]])));
  });

  it('in record order: the record that makes the row unstorable goes, a later one that still fits stays', async () => {
    const query = notes(mode);
    const sink = new SmallRowSink();
    const deadLetters = new MemoryDeadLetterWriter();
    const b: PartitionBackends = { checkpoint: new MemoryCheckpoint(), sink, deadLetters };
    // ["p…"] is 34 characters; with the q note 67 (over 60); with the r note instead 42.
    const batch = records(['a', 'p'.repeat(30)], ['b', 'b1'], ['a', 'q'.repeat(30)], ['a', 'r'.repeat(5)]);
    const result = await runShardInvocation(query, { shardId: 's', records: batch }, b);
    expect(result.error).toBeUndefined();
    expect(deadLetters.records.map((l) => l.sequenceNumber)).toEqual([batch[2]!.sequenceNumber]);
    expect(latestNotes(sink)).toEqual({ a: ['p'.repeat(30), 'r'.repeat(5)], b: ['b1'] });
  });
});

describe('the cost of finding the record a row cannot take', () => {
  it('one oversized note among 200 records of its group: a few probe runs (about 2·log2 n), not one per record of the group', async () => {
    const probeRuns = vi.spyOn(GuardedSink.prototype, 'addBatch');
    try {
      const sink = new SmallRowSink(2000);
      const deadLetters = new MemoryDeadLetterWriter();
      const batch = records(...Array.from({ length: 200 }, (_, i): [string, string] => ['g', i === 100 ? 'x'.repeat(2500) : 'n']), ['h', 'h1']);
      const result = await runShardInvocation(notes('update'), { shardId: 's', records: batch }, { checkpoint: new MemoryCheckpoint(), sink, deadLetters });
      expect(result.error).toBeUndefined();
      expect(deadLetters.records.map((l) => l.sequenceNumber)).toEqual([batch[100]!.sequenceNumber]);
      expect((latestNotes(sink).g as string[]).length).toBe(199);
      // Searching every record that changes g's row took 2 runs per record of g (over 400 here).
      expect(probeRuns.mock.calls.length).toBeLessThanOrEqual(24);
    } finally {
      probeRuns.mockRestore();
    }
  });
});

describe('a refused row that no record of its batch changes', () => {
  it('append mode emits a group whose state grew in earlier batches: the row itself is dead-lettered and left out', async () => {
    const query = compileQuery(defineQuery({
      name: 'notes-append',
      source: { schema: 'k string, note string, ts timestamp' },
      transform: (events) => events.withWatermark('ts', '10 minutes').groupBy(window(col('ts'), '1 hour'), col('k')).agg(collect_list('note').as('notes')),
      outputMode: 'append',
      sink: { kind: 'dynamodb' },
    }), { expectedShardCount: 1 });
    const sink = new SmallRowSink();
    const deadLetters = new MemoryDeadLetterWriter();
    const b: PartitionBackends = { checkpoint: new MemoryCheckpoint(), sink, deadLetters };
    const at = (k: string, note: string, hhmm: string): ShardRecord => ({
      ...records([k, note])[0]!,
      dataBase64: Buffer.from(JSON.stringify({ k, note, ts: `2024-05-01T${hhmm}:00Z` })).toString('base64'),
    });
    // Each record alone is storable; together they are not, and append mode writes nothing until the window closes.
    for (const r of [at('a', 'p'.repeat(30), '14:10'), at('a', 'q'.repeat(30), '14:20'), at('b', 'b1', '14:30')]) {
      expect((await runShardInvocation(query, { shardId: 's', records: [r] }, b)).error).toBeUndefined();
    }
    expect(sink.allRows()).toEqual([]);
    const closing = await runShardInvocation(query, { shardId: 's', records: [at('z', 'z1', '16:00')] }, b);
    expect(closing.error).toBeUndefined();
    expect(closing.firstUncommittedSequenceNumber).toBeNull();
    expect(latestNotes(sink)).toEqual({ b: ['b1'] });
    expect(deadLetters.records).toHaveLength(1);
    const letter = deadLetters.records[0]!;
    expect(letter.reason).toMatch(/^SINK_ITEM_TOO_LARGE: .*\(result row of batch \d+ left out of the sink: no record of the batch changes it/);
    expect(JSON.parse(Buffer.from(letter.dataBase64, 'base64').toString())).toMatchObject({ k: 'a', notes: ['p'.repeat(30), 'q'.repeat(30)] });
  });
});

/** A sink whose next `failures` writes fail as a throttled DynamoDB sink fails: retryable, after the SDK's retries. */
class ThrottledSink extends SmallRowSink {
  failures = 0;

  override async addBatch(batch: Parameters<MemorySink['addBatch']>[0]): Promise<void> {
    if (this.failures > 0) {
      this.failures--;
      throw new SluiceError('DynamoDB throttled the sink writes after the SDK\'s retries', { code: 'SINK_THROTTLED', retryable: true });
    }
    await super.addBatch(batch);
  }
}

describe('a retryable sink failure (throttling, 5xx) is not a refused row', () => {
  it('fails the invocation from its first record, dead-letters nothing, and the retry writes every row once', async () => {
    const query = notes('update');
    const sink = new ThrottledSink();
    const deadLetters = new MemoryDeadLetterWriter();
    const b: PartitionBackends = { checkpoint: new MemoryCheckpoint(), sink, deadLetters };
    const batch = records(['a', 'a1'], ['b', 'b1'], ['a', 'a2']);
    sink.failures = 1;
    const failed = await runShardInvocation(query, { shardId: 's', records: batch }, b);
    expect(failed.error).toMatchObject({ code: 'BATCH_FAILED', retryable: true, cause: { code: 'SINK_THROTTLED' } });
    expect(failed.firstUncommittedSequenceNumber).toBe(batch[0]!.sequenceNumber);
    expect(deadLetters.records).toEqual([]);
    expect(sink.allRows()).toEqual([]);
    const retried = await runShardInvocation(query, { shardId: 's', records: batch }, b);
    expect(retried.error).toBeUndefined();
    expect(retried.firstUncommittedSequenceNumber).toBeNull();
    expect(deadLetters.records).toEqual([]);
    expect(latestNotes(sink)).toEqual({ a: ['a1', 'a2'], b: ['b1'] });
  });
});
