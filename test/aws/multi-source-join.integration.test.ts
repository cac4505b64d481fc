/**
 * Joins of two source streams through the repartition hop on the emulators (kinesis-mock,
 * DynamoDB Local, s3rver): orders and payments, each on 1, 2 and 4 shards with random partition
 * keys, through the real handlers (one function with an event source mapping per stream, the
 * internal stream's function, the scheduled function): the S3 files sink ends with the in-memory
 * engine's rows for inner, left outer, full outer and left semi joins.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readS3Files } from '../../lib/aws/sink-readers.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { deploy } from '../support/aws-pipeline.js';
import { internalStreamTraffic, putWithRandomKeys } from '../support/chain-emulator-run.js';
import { canonicalRow, inMemoryJoin, joinEvents, joinQuery, prng, type JoinShape } from '../support/join-queries.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { col } from '../../lib/plan/functions.js';
import { inspectQuery, label } from '../../lib/aws/query-inspection.js';

const events = joinEvents(240, 11);
const SHARD_COUNTS = (process.env.JOIN_SHARDS ?? '1,2,4').split(',').map(Number);

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

describe('stream-stream joins of two streams through the hop, on the emulators', () => {
  for (const how of ['inner', 'left_outer', 'full_outer', 'left_semi'] as const satisfies readonly JoinShape[]) {
    it(`${how}: the in-memory answer on ${SHARD_COUNTS.join(', ')} shards per stream`, async () => {
      const query = joinQuery(`join-${how.replace('_', '-')}`, how);
      const expected = await inMemoryJoin(query, events);
      expect(expected.length).toBeGreaterThan(0);
      for (const shards of SHARD_COUNTS) {
        const started = Date.now();
        const d = await deploy(emulators, query, shards, { repartitionShards: Math.max(1, Math.min(shards, 2)), expectedShardCount: undefined });
        const rand = prng(shards * 13);
        // Random partition keys: an order and its payment land on any shard of their streams.
        await putWithRandomKeys(d, events.orders, 'orders', rand);
        await putWithRandomKeys(d, events.payments, 'payments', rand);
        await d.drain({ batchSize: 25 });
        await d.tick(Date.now() + 3_600_000); // every source shard caught up and quiet: idle
        await d.tick(Date.now() + 3_600_000);
        const rows = await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix);
        const got = rows.map((r) => canonicalRow(r)).sort();
        expect({ shards, rows: got }).toEqual({ shards, rows: expected });
        expect(d.results.map((r) => r.result.error?.message).filter(Boolean)).toEqual([]);
        const elapsedMs = Date.now() - started;
        const hop = await internalStreamTraffic(d, d.config.repartitionStreamName!);
        const input = events.orders.length + events.payments.length;
        const inputBytes = [...events.orders, ...events.payments].reduce((n, e) => n + JSON.stringify(e).length, 0);
        // The closing note's figures: stages, hop records and bytes per 1,000 events, run time.
        console.log(`JOIN_METRICS ${JSON.stringify({
          how, shards, internalShards: d.config.repartitionStreamName ? Math.max(1, Math.min(shards, 2)) : 0, events: input, resultRows: got.length,
          stages: 2, hopRecordsPer1000: Math.round((hop.records / input) * 1000), hopBytesPer1000: Math.round((hop.bytes / input) * 1000),
          hopBytesRatio: Number((hop.bytes / inputBytes).toFixed(2)), elapsedMs,
        })}`);
      }
    }, 900_000);
  }

  it('sluice status of a join of two streams: each source stream\'s shards under their own partitions, the join\'s stage beside them', async () => {
    const query = joinQuery('join-status', 'inner');
    const d = await deploy(emulators, query, 2, { repartitionShards: 1, expectedShardCount: undefined });
    const rand = prng(3);
    await putWithRandomKeys(d, events.orders.slice(0, 20), 'orders', rand);
    await putWithRandomKeys(d, events.payments.slice(0, 20), 'payments', rand);
    await d.drain({ batchSize: 25 });
    // It read every partition id as a shard of the first stream, and failed on `orders.shardId-…`.
    const status = await inspectQuery(d.clients, { ...d.config, sluiceQuery: query.name });
    expect(status.partitions.map((p) => label(p)).sort()).toEqual([
      'orders shardId-000000000000', 'orders shardId-000000000001', 'payments shardId-000000000000', 'payments shardId-000000000001', 'stage 2 shardId-000000000000',
    ]);
    expect(status.partitions.every((p) => p.lag !== null && p.lag.records === 0)).toBe(true);
    expect(status.partitions.filter((p) => p.lastCommittedBatch !== null).length).toBeGreaterThanOrEqual(3);
  }, 300_000);

  it('a union of the two streams (stateless) runs in one stage on each stream\'s shards: every row once, no hop', async () => {
    const query = defineQuery({
      name: 'union-streams',
      sources: { orders: { schema: 'order_id string, amount long, ts timestamp' }, payments: { schema: 'ref string, paid long, pts timestamp' } },
      transform: ({ orders, payments }) => orders!.select(col('order_id').as('id'), col('amount').as('value'))
        .union(payments!.select(col('ref').as('id'), col('paid').as('value'))).filter(col('value').gt(5)),
      outputMode: 'append',
      sink: { kind: 's3-files' },
    });
    const d = await deploy(emulators, query, 2, { expectedShardCount: undefined });
    const rand = prng(5);
    await putWithRandomKeys(d, events.orders, 'orders', rand);
    await putWithRandomKeys(d, events.payments, 'payments', rand);
    await d.drain({ batchSize: 25 });
    const rows = (await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix)).map((r) => canonicalRow(r)).sort();
    const expected = [
      ...events.orders.map((o) => ({ id: o.order_id, value: o.amount })), ...events.payments.map((p) => ({ id: p.ref, value: p.paid })),
    ].filter((r) => r.value > 5).map((r) => canonicalRow(r)).sort();
    expect(rows).toEqual(expected);
    expect(d.results.map((r) => r.result.error?.message).filter(Boolean)).toEqual([]);
    // Each stream's shards ran as their own partitions.
    expect(new Set(d.results.filter((r) => r.result.progress.length > 0).map((r) => r.result.stage.sourceName))).toEqual(new Set(['orders', 'payments']));
  }, 300_000);
});
