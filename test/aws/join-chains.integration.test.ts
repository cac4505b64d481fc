/**
 * Chains of stateful operators over several source streams on the emulators (kinesis-mock, DynamoDB
 * Local, s3rver), through the real handlers: orders ⋈ payments then a windowed sum (three stages,
 * two internal streams), an aggregate or a deduplication over a union of the two streams, and
 * orders ⋈ payments ⋈ shipments on one key (join → join, three streams into one stage 2). Each
 * on 2 and 4 shards per stream (CHAIN_SHARDS overrides) with random partition keys: the S3 files
 * sink ends with the in-memory engine's rows. Each run logs CHAIN_METRICS (records, batches, hop
 * traffic, time) for the closing note.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readS3Files } from '../../lib/aws/sink-readers.js';
import { KinesisShardReader } from '../../lib/aws/kinesis-shard-reader.js';
import { listAllShards } from '../../lib/local/kinesis-admin.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import type { MultiSourceQueryDefinition } from '../../lib/query/query-definition.js';
import { deploy, type Deployment } from '../support/aws-pipeline.js';
import { canonicalRow, inMemoryJoin, joinEvents, prng } from '../support/join-queries.js';
import {
  inMemoryThree, joinThenJoin, joinThenWindowedSum, shipmentsFor, unionThenDedup, unionThenWindowedCount,
} from '../support/chain-queries.js';

const SHARD_COUNTS = (process.env.CHAIN_SHARDS ?? '2,4').split(',').map(Number);
const INTERNAL_SHARDS = Number(process.env.CHAIN_INTERNAL_SHARDS ?? 2);

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

/** Records and bytes on one internal stream. */
async function traffic(d: Deployment, stream: string): Promise<{ records: number; bytes: number }> {
  const reader = new KinesisShardReader(d.clients.kinesis, stream);
  let records = 0;
  let bytes = 0;
  for (const shard of await listAllShards(d.clients.kinesis, stream)) {
    let after: string | null = null;
    for (;;) {
      const page = await reader.readAfter(shard.ShardId!, after, 1000);
      if (page.records.length === 0) break;
      records += page.records.length;
      bytes += page.records.reduce((n, r) => n + Buffer.from(r.dataBase64, 'base64').length, 0);
      after = page.records[page.records.length - 1]!.sequenceNumber;
    }
  }
  return { records, bytes };
}

type Events = Record<string, readonly object[]>;
const withShipments = (e: ReturnType<typeof joinEvents>): Events => ({ ...e, shipments: shipmentsFor(e.orders, 5) });

const shapes: [string, MultiSourceQueryDefinition, Events, (def: MultiSourceQueryDefinition, events: Events) => Promise<string[]>][] = [
  ['inner join → windowed sum (append → S3 files), three stages', joinThenWindowedSum('chain-join-sum'), joinEvents(360, 7), inTwo],
  ['windowed count over a union of the two streams (append → S3 files)', unionThenWindowedCount('chain-union-count'), joinEvents(240, 11), inTwo],
  ['deduplication within the watermark over a union of the two streams (append → S3 files)', unionThenDedup('chain-union-dedup'), joinEvents(240, 11), inTwo],
  ['left outer join → inner join with a third stream on one key (append → S3 files)', joinThenJoin('chain-join-join', 'left_outer'), withShipments(joinEvents(240, 11)), inThree],
];

function inTwo(def: MultiSourceQueryDefinition, events: Events): Promise<string[]> {
  return inMemoryJoin(def, events as ReturnType<typeof joinEvents>);
}

function inThree(def: MultiSourceQueryDefinition, events: Events): Promise<string[]> {
  return inMemoryThree(def, events as Parameters<typeof inMemoryThree>[1]);
}

describe('chains of stateful operators over two streams, on the emulators', () => {
  for (const [name, query, events, inMemory] of shapes) {
    it(`${name}: the in-memory answer on ${SHARD_COUNTS.join(', ')} shards per stream`, async () => {
      const expected = await inMemory(query, events);
      expect(expected.length).toBeGreaterThan(2);
      const hops = compileQuery(query, { allowRepartition: true }).hops.length;
      for (const shards of SHARD_COUNTS) {
        const started = Date.now();
        const d = await deploy(emulators, query, shards, { repartitionShards: INTERNAL_SHARDS, expectedShardCount: undefined, hops });
        const rand = prng(shards * 17);
        for (const [source, rows] of Object.entries(events)) {
          await d.put(rows.map((e) => ({ data: JSON.stringify(e), partitionKey: `k${Math.floor(rand() * 1e6)}` })), source);
        }
        await d.drain({ batchSize: 25 });
        // Every source shard caught up and quiet: idle; one tick per stage lets each forward its watermark.
        for (let tick = 0; tick <= hops; tick++) await d.tick(Date.now() + 3_600_000);
        const rows = await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix);
        const got = rows.map((r) => canonicalRow(r)).sort();
        expect({ shards, rows: got }).toEqual({ shards, rows: expected });
        expect(d.results.map((r) => r.result.error?.message).filter(Boolean)).toEqual([]);
        // The last stage's progress records give its operators' watermarks (Spark's per-operator pair).
        const lastStage = d.results.filter((r) => r.result.stage.index === hops).flatMap((r) => r.result.progress);
        expect(lastStage.some((p) => p.stateOperators.some((o) => Date.parse(o.eventTimeWatermarkForEviction ?? '1970-01-01') > 0))).toBe(true);
        const elapsedMs = Date.now() - started;
        const internal = d.config.repartitionStreamNames ?? [d.config.repartitionStreamName!];
        const hopTraffic = await Promise.all(internal.map((s) => traffic(d, s)));
        const input = Object.values(events).reduce((n, rows) => n + rows.length, 0);
        const batches = d.results.reduce((n, r) => n + r.result.progress.length, 0);
        console.log(`CHAIN_METRICS ${JSON.stringify({
          query: query.name, shards, internalShards: INTERNAL_SHARDS, stages: hops + 1, events: input, resultRows: got.length, batches,
          hopRecordsPer1000: hopTraffic.map((h) => Math.round((h.records / input) * 1000)),
          hopBytesPer1000: hopTraffic.map((h) => Math.round((h.bytes / input) * 1000)),
          elapsedMs,
        })}`);
      }
    }, 1_800_000);
  }
});
