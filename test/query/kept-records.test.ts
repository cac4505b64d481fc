/**
 * Kept records in memory (InMemoryKeptRecords, the local and in-memory backends' store) through the
 * engine: the same guarantee as on DynamoDB (test/aws/kept-records.integration.test.ts), quickly.
 */
import { describe, expect, it } from 'vitest';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { InMemoryKeptRecords } from '../../lib/query/kept-records.js';
import type { PartitionBackends } from '../../lib/query/partition-backends.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { runShardInvocation } from '../../lib/query/shard-invocation.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import type { Sink, SinkBatch } from '../../lib/sinks/sink.js';
import { MemoryDeadLetterWriter } from '../../lib/sources/dead-letter.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import { GuardedSink } from '../../lib/query/unwritable-rows.js';
import { hourlySales, SALES_SCHEMA } from '../support/hourly-sales.js';

const query = compileQuery(defineQuery({ name: 'kept', source: { schema: SALES_SCHEMA }, transform: hourlySales, outputMode: 'update', sink: { kind: 'dynamodb' } }), { expectedShardCount: 1 });
const HOUR = 3_600_000;
let seq = 1_000n;
const recordsOf = (n: number, arrivalMs: number): ShardRecord[] => Array.from({ length: n }, (_, i) => ({
  sequenceNumber: String(seq += 1_000n), partitionKey: 'p', approximateArrivalTimestampMs: arrivalMs,
  dataBase64: Buffer.from(JSON.stringify({ store_id: ['north', 'south'][i % 2], amount: i + 1, ts: `2024-05-01T14:0${i}:00Z` })).toString('base64'),
}));
const trimmedTo = (held: readonly ShardRecord[]) => ({ read: async () => [...held] });

function setUp() {
  const checkpoint = new MemoryCheckpoint();
  const kept = new InMemoryKeptRecords();
  const writes: SinkBatch[] = [];
  const losses: unknown[] = [];
  const backends = (fail?: 'after-write' | 'before-write', reader?: PartitionBackends['shardReader']): PartitionBackends => ({
    checkpoint, deadLetters: new MemoryDeadLetterWriter(), keptRecords: kept, keepPolicy: { retentionMs: 24 * HOUR },
    ...(reader ? { shardReader: reader } : {}),
    recordExpiredRecords: async (loss) => { kept.recordLoss(loss.shardId, loss.firstSequenceNumber); losses.push(loss); return loss; },
    sink: Object.assign(Object.create(new MemorySink()) as Sink, {
      addBatch: async (b: SinkBatch) => {
        if (fail === 'before-write') throw new Error('sink unavailable');
        writes.push(b);
        if (fail === 'after-write') throw new Error('killed after the sink write');
      },
    }),
  });
  return { kept, writes, losses, backends, run: (records: ShardRecord[], b: PartitionBackends) => runShardInvocation(query, { shardId: 's', records }, b) };
}

describe('kept records (memory)', () => {
  it('an attempt that wrote and died, a retry that kept, a run after the trim: every write of the batch is the same, nothing lost, the copy removed', async () => {
    const t = setUp();
    const batch = recordsOf(4, Date.now());
    expect((await t.run(batch, t.backends('after-write'))).error?.message).toMatch(/killed/);
    expect(t.kept.writes).toBe(0);
    expect((await t.run(batch, t.backends('before-write'))).error?.message).toMatch(/unavailable/);
    expect(t.kept.size).toBe(1);
    const r = await t.run([], t.backends(undefined, trimmedTo([])));
    expect(r.error).toBeUndefined();
    expect(r.progress.map((p) => [p.batchId, p.numInputRows])).toEqual([[0, 4]]);
    expect(t.losses).toEqual([]);
    expect(t.writes.map((w) => [w.batchId, w.revision ?? 0, w.rows])).toEqual([[0, 0, t.writes[0]!.rows], [0, 0, t.writes[0]!.rows]]);
    expect(t.kept.size).toBe(0);
  });

  it('a first attempt at risk whose batch has a recorded loss writes nothing', async () => {
    const t = setUp();
    const batch = recordsOf(2, Date.now() - 24 * HOUR + 60_000);
    t.kept.recordLoss('s', batch[0]!.sequenceNumber);
    const r = await t.run(batch, t.backends());
    expect(r.error?.message).toMatch(/a loss to retention is recorded/);
    expect(t.writes).toEqual([]);
  });

  it('the keep comes before the batch\'s result-row letters too: an attempt refused its keep writes no letter and no row', async () => {
    const letters: unknown[] = [];
    const rows: SinkBatch[] = [];
    const sink = new GuardedSink(
      Object.assign(Object.create(new MemorySink()) as Sink, { addBatch: async (b: SinkBatch) => { rows.push(b); } }),
      { rowKey: (_b, i) => String(i), check: () => ({ code: 'SINK_KEY_TOO_LONG', reason: 'key over 2048 bytes' }) },
      async (_batch, left) => { letters.push(...left); }, async (_id, raising) => { letters.push(...raising); },
    );
    sink.beforeWrite = async () => { throw new Error('a loss to retention is recorded'); };
    sink.skip(0, [{ rowIndex: 0, rowKey: '0', refusal: { code: 'SINK_KEY_TOO_LONG', reason: 'key over 2048 bytes' } }]);
    const batch: SinkBatch = { batchId: 0, columns: ['k'], rows: [['x']], outputMode: 'update', schema: [{ name: 'k', type: 'string' }], partitionId: 's' };
    await expect(sink.addBatch(batch)).rejects.toThrow(/a loss to retention is recorded/);
    expect(letters).toEqual([]);
    expect(rows).toEqual([]);
  });

  it('a stale re-run that finds the records trimmed after another attempt committed from the copy and removed it writes nothing', async () => {
    const t = setUp();
    const batch = recordsOf(4, Date.now());
    // Batch 0 is planned, its attempt fails before writing (not at risk: nothing kept).
    expect((await t.run(batch, t.backends('before-write'))).error?.message).toMatch(/unavailable/);
    let fresh: Awaited<ReturnType<typeof t.run>> | undefined;
    // A stale re-run (the scheduled tick beside the mapping's retry) is past its recovery when the
    // retry, holding every record, keeps them, commits batch 0 and removes the copy; then the stale
    // one reads the shard, trimmed of the oldest two records.
    const stale = await t.run([], t.backends(undefined, {
      read: async () => {
        fresh = await t.run(batch, t.backends());
        return batch.slice(2);
      },
    }));
    expect(fresh?.error).toBeUndefined();
    expect(fresh?.progress.map((p) => p.batchId)).toEqual([0]);
    expect(stale.error?.message).toMatch(/committed/);
    // It saw the commit before recording a loss: none is recorded for a batch that lost nothing.
    expect(t.losses).toEqual([]);
    // Only the committed run's rows reach the sink: none of a lower count of records at a higher revision.
    expect(t.writes.map((w) => [w.batchId, w.revision ?? 0])).toEqual([[0, 0]]);
  });
});
