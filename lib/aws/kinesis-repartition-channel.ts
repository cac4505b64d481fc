/**
 * The internal repartition stream on Kinesis: its open shards (by hash range) and PutRecords with
 * an explicit hash key per record, retrying the entries Kinesis rejects until all are written.
 */
import { PutRecordsCommand, type KinesisClient } from '@aws-sdk/client-kinesis';
import { listStreamShards } from './kinesis-shard-reader.js';
import type { CostMeter } from '../core/cost-meter.js';
import type { RepartitionChannel, RepartitionRecordOut, RepartitionTarget } from '../sinks/repartition-sink.js';

const MAX_RECORDS_PER_PUT = 500;
const MAX_BYTES_PER_PUT = 4 * 1024 * 1024;
const SHARD_CACHE_MS = 30_000;

export class KinesisRepartitionChannel implements RepartitionChannel {
  private cached: { at: number; shards: RepartitionTarget[] } | null = null;

  constructor(private readonly kinesis: KinesisClient, private readonly streamName: string, private readonly meter?: CostMeter) {}

  async shards(): Promise<readonly RepartitionTarget[]> {
    if (this.cached && Date.now() - this.cached.at < SHARD_CACHE_MS) return this.cached.shards;
    const shards: RepartitionTarget[] = [];
    for (const s of await listStreamShards(this.kinesis, this.streamName)) {
      if (s.SequenceNumberRange?.EndingSequenceNumber !== undefined) continue; // closed by a reshard
      shards.push({ shardId: s.ShardId!, startingHashKey: BigInt(s.HashKeyRange!.StartingHashKey!), endingHashKey: BigInt(s.HashKeyRange!.EndingHashKey!) });
    }
    shards.sort((a, b) => (a.startingHashKey < b.startingHashKey ? -1 : 1));
    this.cached = { at: Date.now(), shards };
    return shards;
  }

  refresh(): void {
    this.cached = null;
  }

  /** Writes every record; answers the shard each one went to, in order. */
  async put(records: readonly RepartitionRecordOut[]): Promise<string[]> {
    const landed: string[] = [];
    const indexOf = new Map(records.map((r, i) => [r, i]));
    for (const chunk of chunks(records)) {
      let pending = chunk;
      for (let attempt = 0; pending.length > 0; attempt++) {
        if (attempt > 0) await new Promise((r) => setTimeout(r, Math.min(50 * 2 ** attempt, 2_000)));
        if (attempt > 10) throw new Error(`PutRecords to ${this.streamName}: ${pending.length} records still rejected after ${attempt} attempts`);
        const response = await this.kinesis.send(new PutRecordsCommand({
          StreamName: this.streamName,
          Records: pending.map((r) => ({ Data: r.data, PartitionKey: r.partitionKey, ExplicitHashKey: r.explicitHashKey })),
        }));
        this.meter?.add('kinesisPutRecords', 1);
        const results = response.Records ?? [];
        pending.forEach((r, i) => { if (results[i]?.ShardId && !results[i]?.ErrorCode) landed[indexOf.get(r)!] = results[i]!.ShardId!; });
        pending = pending.filter((_, i) => results[i]?.ErrorCode !== undefined);
      }
    }
    return landed;
  }
}

function* chunks(records: readonly RepartitionRecordOut[]): Generator<RepartitionRecordOut[]> {
  let chunk: RepartitionRecordOut[] = [];
  let bytes = 0;
  for (const r of records) {
    const size = r.data.length + r.partitionKey.length;
    if (chunk.length > 0 && (chunk.length >= MAX_RECORDS_PER_PUT || bytes + size > MAX_BYTES_PER_PUT)) {
      yield chunk;
      chunk = [];
      bytes = 0;
    }
    chunk.push(r);
    bytes += size;
  }
  if (chunk.length > 0) yield chunk;
}
