/**
 * Kept records (issue 11) on DynamoDB Local, through the engine (runShardInvocation) with the
 * checkpoint, the upsert sink, the loss record and the kept copy all in real tables: a batch at risk
 * of retention keeps its planned records, so a run that finds the shard trimmed runs with all of
 * them, and any earlier or stale attempt's sink write is the committed run's. Retention is
 * simulated by a shard reader that leaves out the trimmed records (as test/query's); the one fault
 * per attempt is a sink wrapper.
 */
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DynamoDbCheckpoint } from '../../lib/aws/dynamodb-checkpoint.js';
import { queryAll } from '../../lib/aws/dynamodb-cost.js';
import { DynamoDbKeptRecords, KEPT_RECORDS_SUFFIX } from '../../lib/aws/kept-records.js';
import { DynamoDbUpsertSink } from '../../lib/aws/dynamodb-upsert-sink.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { expiredPlannedKey, SkippedBatchStore } from '../../lib/aws/skipped-batches.js';
import { ensureTables } from '../../lib/aws/tables.js';
import { CostMeter } from '../../lib/core/cost-meter.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import type { PartitionBackends, ShardReader } from '../../lib/query/partition-backends.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { runShardInvocation } from '../../lib/query/shard-invocation.js';
import type { Sink, SinkBatch } from '../../lib/sinks/sink.js';
import { MemoryDeadLetterWriter } from '../../lib/sources/dead-letter.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import { checkpointTablesForFile } from '../support/checkpoint-tables.js';
import { canonicalSales, hourlySales, inMemoryHourlySales, SALES_SCHEMA, type Sale } from '../support/hourly-sales.js';

const tables = checkpointTablesForFile(`sluice-kept-${process.pid}`);
const SHARD = 'shardId-000000000000';
const STREAM = 'kept-stream';
const HOUR = 3_600_000;

const sale = (i: number, store = ['north', 'south'][i % 2]!): Sale => ({ store_id: store, amount: 10 * i + 1, ts: new Date(Date.UTC(2024, 4, 1, 14, i)).toISOString() });
let seq = 49_000_000_000_000_000_000n;
const recordsOf = (sales: readonly Sale[], arrivalMs: number): ShardRecord[] => sales.map((s) => ({
  sequenceNumber: String(seq += 1_000_000n), partitionKey: s.store_id, dataBase64: Buffer.from(JSON.stringify(s)).toString('base64'), approximateArrivalTimestampMs: arrivalMs,
}));
/** The shard after a trim: only the records from `firstHeld` on (none: everything before is gone). */
const trimmed = (held: readonly ShardRecord[]): ShardReader => ({
  read: async (_shard, first, last) => held.filter((r) => BigInt(r.sequenceNumber) >= BigInt(first) && BigInt(r.sequenceNumber) <= BigInt(last)),
});

/** One query's tables and the backends of its shard, with a sink fault and a shard reader per attempt. */
async function setUp() {
  const name = `kept-${randomUUID().slice(0, 8)}`;
  const sinkTable = `${tables.checkpointTable}-${name}`;
  const client = tables.aws.dynamodb;
  await ensureTables(client, { checkpointTable: tables.checkpointTable, stateTable: tables.stateTable, sinkTable });
  const definition = defineQuery({ name, source: { schema: SALES_SCHEMA, partitionKey: 'store_id' }, transform: hourlySales, outputMode: 'update', sink: { kind: 'dynamodb' } });
  const query = compileQuery(definition, { expectedShardCount: 1 });
  const sink = new DynamoDbUpsertSink({ client, tableName: sinkTable, keyColumns: query.keyColumns });
  const losses = new SkippedBatchStore({ client, checkpointTable: tables.checkpointTable, queryName: name });
  const keptMeter = new CostMeter();
  const backends = (fault: (s: Sink) => Sink = (s) => s, reader?: ShardReader): PartitionBackends => ({
    checkpoint: new DynamoDbCheckpoint({ client, checkpointTable: tables.checkpointTable, stateTable: tables.stateTable, queryName: name, partitionId: SHARD }),
    sink: fault(sink), sinkRowLimits: sink.rowLimits, deadLetters: new MemoryDeadLetterWriter(),
    ...(reader ? { shardReader: reader } : {}),
    recordExpiredRecords: (loss) => losses.recordExpiredPlanned(SHARD, STREAM, loss),
    expiredRecordsCommitWrite: (loss) => losses.expiredCommitWrite(SHARD, loss),
    keptRecords: new DynamoDbKeptRecords({ client, checkpointTable: tables.checkpointTable, queryName: name, partitionId: SHARD, meter: keptMeter }),
    keepPolicy: { retentionMs: 24 * HOUR },
  });
  const run = (records: readonly ShardRecord[], b: PartitionBackends) => runShardInvocation(query, { shardId: SHARD, records }, b);
  const answer = async () => canonicalSales(await scanDynamoDbSink(client, sinkTable));
  const keptItems = async () => (await queryAll(client, {
    TableName: tables.checkpointTable, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': { S: `${name}${KEPT_RECORDS_SUFFIX}` } },
  }, undefined)).length;
  const claim = async (first: string) => (await client.send(new GetItemCommand({
    TableName: tables.checkpointTable, Key: expiredPlannedKey(name, SHARD, first), ConsistentRead: true,
  }))).Item;
  return { name, sink, losses, keptMeter, backends, run, answer, keptItems, claim };
}

/** The sink writes, then the attempt dies before its commit (a crash with no catch path, as seen from the sink). */
const diesAfterWrite = (s: Sink): Sink => Object.assign(Object.create(s) as Sink, {
  addBatch: async (b: SinkBatch) => { await s.addBatch(b); throw new Error('killed after the sink write'); },
});
/** The write never reaches the sink (the attempt freezes before it): it is kept to be sent late. */
const freezesBeforeWrite = (held: SinkBatch[]) => (s: Sink): Sink => Object.assign(Object.create(s) as Sink, {
  addBatch: async (b: SinkBatch) => { held.push(b); throw new Error('frozen before the sink write'); },
});

describe('kept records: a batch at risk of retention runs with all its planned records', () => {
  it('case 1: an attempt wrote the sink and died; its retry kept the records; after the trim the next run commits them all, and the copy is removed', async () => {
    const t = await setUp();
    const sales = [0, 1, 2, 3].map((i) => sale(i));
    const batch = recordsOf(sales, Date.now());
    // Attempt A, not at risk (records just arrived, 24 h retention): no keeping at all.
    const a = await t.run(batch, t.backends(diesAfterWrite));
    expect(a.error?.message).toMatch(/killed after the sink write/);
    expect(t.keptMeter.snapshot()).toEqual({});
    expect(await t.answer()).toEqual(await inMemoryHourlySales(sales));
    // Its retry (the same delivery) re-runs the pending batch: it keeps the records, then fails before writing.
    const b = await t.run(batch, t.backends((s) => Object.assign(Object.create(s) as Sink, { addBatch: async () => { throw new Error('sink unavailable'); } })));
    expect(b.error?.message).toMatch(/sink unavailable/);
    expect((await t.claim(batch[0]!.sequenceNumber))?.keptBatch).toEqual({ N: '0' });
    // Retention takes all of batch 0; new records arrive. The next run reads the kept copy.
    const later = recordsOf([4, 5].map((i) => sale(i, 'west')), Date.now());
    const c = await t.run(later, t.backends(undefined, trimmed(later)));
    expect(c.error).toBeUndefined();
    expect(c.progress.map((p) => [p.batchId, p.numInputRows])).toEqual([[0, 4], [1, 2]]);
    expect(c.expired).toBeUndefined();
    expect(await t.losses.list()).toEqual([]);
    expect(await t.answer()).toEqual(await inMemoryHourlySales([...sales, sale(4, 'west'), sale(5, 'west')]));
    // Committed: the raw records are removed, claim and pages.
    expect(await t.keptItems()).toBe(0);
    expect(await t.claim(batch[0]!.sequenceNumber)).toBeUndefined();
  }, 120_000);

  it('case 2: an attempt at risk keeps before its sink write; the run after the trim commits from the copy; the stale attempt then writes: the sink is the committed answer', async () => {
    const t = await setUp();
    const sales = [0, 1, 2, 3].map((i) => sale(i));
    // Two minutes from leaving a 24 h stream: within the attempt's deadline plus the margin.
    const batch = recordsOf(sales, Date.now() - 24 * HOUR + 2 * 60_000);
    const stale: SinkBatch[] = [];
    const a = await t.run(batch, t.backends(freezesBeforeWrite(stale)));
    expect(a.error?.message).toMatch(/frozen/);
    expect((await t.claim(batch[0]!.sequenceNumber))?.keptBatch).toEqual({ N: '0' });
    const b = await t.run([], t.backends(undefined, trimmed([])));
    expect(b.error).toBeUndefined();
    expect(b.progress.map((p) => [p.batchId, p.numInputRows])).toEqual([[0, 4]]);
    expect(await t.losses.list()).toEqual([]);
    const committed = await t.answer();
    expect(committed).toEqual(await inMemoryHourlySales(sales));
    // The stale attempt wakes and writes last (this was the sink's open `it.fails` case): nothing changes.
    for (const s of stale) await t.sink.addBatch(s);
    expect(await t.answer()).toEqual(committed);
  }, 120_000);

  it('a loss recorded first refuses the keep, and that attempt writes nothing; a copy kept first refuses the loss', async () => {
    const t = await setUp();
    const atRisk = Date.now() - 24 * HOUR + 60_000;
    const batch = recordsOf([0, 1].map((i) => sale(i)), atRisk);
    await t.losses.recordExpiredPlanned(SHARD, STREAM, { shardId: SHARD, batchId: 0, firstSequenceNumber: batch[0]!.sequenceNumber, lastSequenceNumber: batch[1]!.sequenceNumber, count: 2 });
    const refused = await t.run(batch, t.backends());
    expect(refused.error?.message).toMatch(/a loss to retention is recorded/);
    expect(await t.answer()).toEqual([]);

    const u = await setUp();
    const other = recordsOf([0, 1].map((i) => sale(i)), atRisk);
    const frozen = await u.run(other, u.backends(freezesBeforeWrite([])));
    expect(frozen.error?.message).toMatch(/frozen/);
    await expect(u.losses.recordExpiredPlanned(SHARD, STREAM, {
      shardId: SHARD, batchId: 0, firstSequenceNumber: other[0]!.sequenceNumber, lastSequenceNumber: other[1]!.sequenceNumber, count: 2,
    })).rejects.toThrow(/kept/);
    expect(await u.losses.list()).toEqual([]);
  }, 120_000);

  it('a stale re-run that finds the shard trimmed after another attempt committed from every record leaves the committed rows', async () => {
    const t = await setUp();
    const sales = [0, 1, 2, 3].map((i) => sale(i));
    const batch = recordsOf(sales, Date.now());
    const a = await t.run(batch, t.backends((s) => Object.assign(Object.create(s) as Sink, { addBatch: async () => { throw new Error('sink unavailable'); } })));
    expect(a.error?.message).toMatch(/sink unavailable/);
    // The stale run recovered batch 0 as pending; before it reads the shard, a retry holding every
    // record keeps them, commits and removes the copy; the shard has lost the oldest two meanwhile.
    let fresh: Awaited<ReturnType<typeof t.run>> | undefined;
    const stale = await t.run([], t.backends(undefined, {
      read: async (_shard, first, last) => {
        fresh = await t.run(batch, t.backends());
        return trimmed(batch.slice(2)).read(SHARD, first, last);
      },
    }));
    expect(fresh?.error).toBeUndefined();
    expect(stale.error?.message).toMatch(/committed by another attempt/);
    // Its rows of two records at revision 2 would pass the sink's fence over the committed revision 0.
    expect(await t.answer()).toEqual(await inMemoryHourlySales(sales));
  }, 120_000);

  it('a first attempt not at risk that commits makes no request for kept records', async () => {
    const t = await setUp();
    const r = await t.run(recordsOf([0, 1, 2].map((i) => sale(i)), Date.now()), t.backends());
    expect(r.error).toBeUndefined();
    expect(t.keptMeter.snapshot()).toEqual({});
    expect(await t.keptItems()).toBe(0);
  }, 120_000);
});
