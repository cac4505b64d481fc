/**
 * One multi-stage query over several streams on the emulators, through the real handlers, for each
 * shard count: random partition keys, drained, every stage ticked idle; the S3 files sink must equal
 * the in-memory engine's rows. Logs CHAIN_METRICS (stages, batches, hop records and bytes per 1,000
 * events, time) for the closing note. Shared by the join-chain emulator tests.
 */
import { expect } from 'vitest';
import { readS3Files } from '../../lib/aws/sink-readers.js';
import { KinesisShardReader } from '../../lib/aws/kinesis-shard-reader.js';
import { listAllShards } from '../../lib/local/kinesis-admin.js';
import type { EmulatorSet } from '../../lib/local/emulators.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import type { MultiSourceQueryDefinition } from '../../lib/query/query-definition.js';
import { deploy, type Deployment } from './aws-pipeline.js';
import { canonicalRow, prng } from './join-queries.js';

/** Records and bytes on one internal stream: what crossed a hop. */
export async function internalStreamTraffic(d: Deployment, stream: string): Promise<{ records: number; bytes: number }> {
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

/** Puts JSON events into a source stream with random partition keys (any event lands on any shard). */
export async function putWithRandomKeys(d: Deployment, rows: readonly object[], source: string, rand: () => number): Promise<void> {
  await d.put(rows.map((e) => ({ data: JSON.stringify(e), partitionKey: `k${Math.floor(rand() * 1e6)}` })), source);
}

export type ChainEvents = Record<string, readonly object[]>;

export async function runChainOnEmulators(
  emulators: EmulatorSet, query: MultiSourceQueryDefinition, events: ChainEvents, expected: readonly string[],
  shardCounts: readonly number[], internalShards: number,
): Promise<void> {
  const hops = compileQuery(query, { allowRepartition: true }).hops.length;
  for (const shards of shardCounts) {
    const started = Date.now();
    const d = await deploy(emulators, query, shards, { repartitionShards: internalShards, expectedShardCount: undefined, hops });
    const rand = prng(shards * 17);
    for (const [source, rows] of Object.entries(events)) await putWithRandomKeys(d, rows, source, rand);
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
    const hopTraffic = await Promise.all(internal.map((s) => internalStreamTraffic(d, s)));
    const input = Object.values(events).reduce((n, r) => n + r.length, 0);
    const batches = d.results.reduce((n, r) => n + r.result.progress.length, 0);
    console.log(`CHAIN_METRICS ${JSON.stringify({
      query: query.name, shards, internalShards, stages: hops + 1, events: input, resultRows: got.length, batches,
      hopRecordsPer1000: hopTraffic.map((h) => Math.round((h.records / input) * 1000)),
      hopBytesPer1000: hopTraffic.map((h) => Math.round((h.bytes / input) * 1000)),
      elapsedMs,
    })}`);
  }
}
