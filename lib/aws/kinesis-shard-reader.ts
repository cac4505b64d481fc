/**
 * Reads a shard's records between two sequence numbers with GetShardIterator/GetRecords: how a
 * planned batch re-runs with exactly its records when Lambda redelivers only part of them (a
 * bisected retry), and how the scheduled handler checks that a shard is caught up.
 */
import { GetRecordsCommand, GetShardIteratorCommand, ListShardsCommand, type KinesisClient, type Shard, type _Record } from '@aws-sdk/client-kinesis';
import type { ShardRecord } from '../sources/kinesis-shard-source.js';
import type { ShardReader } from '../query/partition-backends.js';
import type { CostMeter } from '../core/cost-meter.js';

export function toShardRecord(record: _Record): ShardRecord {
  return {
    sequenceNumber: record.SequenceNumber!,
    partitionKey: record.PartitionKey!,
    dataBase64: Buffer.from(record.Data ?? new Uint8Array()).toString('base64'),
    approximateArrivalTimestampMs: record.ApproximateArrivalTimestamp?.getTime() ?? 0,
  };
}

export interface ShardPosition {
  readonly records: ShardRecord[];
  /** 0 when the reader reached the tip of the shard. */
  readonly millisBehindLatest: number;
  /** The shard is closed (resharded) and fully read. */
  readonly closed: boolean;
}

export class KinesisShardReader implements ShardReader {
  constructor(
    private readonly kinesis: KinesisClient,
    private readonly streamName: string,
    private readonly meter?: CostMeter,
  ) {}

  async read(shardId: string, firstSequenceNumber: string, lastSequenceNumber: string): Promise<ShardRecord[]> {
    const first = BigInt(firstSequenceNumber);
    const last = BigInt(lastSequenceNumber);
    const out: ShardRecord[] = [];
    let iterator = await this.iteratorAtOrTrimHorizon(shardId, firstSequenceNumber);
    // Empty pages happen inside a shard; stop at the last planned record or the end of the shard.
    for (let emptyPages = 0; iterator && emptyPages < 20;) {
      const page = await this.kinesis.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: 10_000 }));
      this.meter?.add('kinesisGetRecords', 1);
      const records = page.Records ?? [];
      emptyPages = records.length === 0 ? emptyPages + 1 : 0;
      for (const r of records) {
        if (BigInt(r.SequenceNumber!) > last) return out;
        if (BigInt(r.SequenceNumber!) < first) continue;
        out.push(toShardRecord(r));
      }
      if (out.length > 0 && BigInt(out[out.length - 1]!.sequenceNumber) === last) return out;
      if ((page.MillisBehindLatest ?? 0) === 0 && records.length === 0) break;
      iterator = page.NextShardIterator;
    }
    return out;
  }

  /**
   * Records after `afterSequenceNumber` (or from the oldest, or with a positive `startAtMs` from the
   * first that arrived at or after that time), up to `limit`, and whether caught up.
   */
  async readAfter(shardId: string, afterSequenceNumber: string | null, limit = 10_000, startAtMs?: number): Promise<ShardPosition> {
    let iterator = afterSequenceNumber !== null
      ? await this.iterator(shardId, 'AFTER_SEQUENCE_NUMBER', afterSequenceNumber)
      : startAtMs !== undefined && startAtMs > 0 ? await this.iterator(shardId, 'AT_TIMESTAMP', undefined, startAtMs) : await this.iterator(shardId, 'TRIM_HORIZON');
    const records: ShardRecord[] = [];
    let millisBehindLatest = 0;
    for (let pages = 0; iterator && pages < 50 && records.length < limit; pages++) {
      const page = await this.kinesis.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: Math.min(10_000, limit - records.length) }));
      this.meter?.add('kinesisGetRecords', 1);
      records.push(...(page.Records ?? []).map(toShardRecord));
      millisBehindLatest = page.MillisBehindLatest ?? 0;
      iterator = page.NextShardIterator;
      if ((page.Records ?? []).length === 0 && millisBehindLatest === 0) break;
    }
    return { records, millisBehindLatest, closed: iterator === undefined || iterator === null };
  }

  /**
   * At the sequence number, or at the oldest record when the stream refuses it (retention passed
   * it): the records still held are read, and the caller sees which planned ones are gone.
   */
  private async iteratorAtOrTrimHorizon(shardId: string, sequenceNumber: string): Promise<string | undefined> {
    try {
      return await this.iterator(shardId, 'AT_SEQUENCE_NUMBER', sequenceNumber);
    } catch (error) {
      if ((error as Error).name !== 'InvalidArgumentException') throw error;
      return this.iterator(shardId, 'TRIM_HORIZON');
    }
  }

  private async iterator(
    shardId: string, type: 'AT_SEQUENCE_NUMBER' | 'AFTER_SEQUENCE_NUMBER' | 'TRIM_HORIZON' | 'AT_TIMESTAMP', sequenceNumber?: string, atMs?: number,
  ): Promise<string | undefined> {
    const response = await this.kinesis.send(new GetShardIteratorCommand({
      StreamName: this.streamName, ShardId: shardId, ShardIteratorType: type,
      ...(sequenceNumber !== undefined ? { StartingSequenceNumber: sequenceNumber } : {}),
      ...(atMs !== undefined ? { Timestamp: new Date(atMs) } : {}),
    }));
    return response.ShardIterator;
  }
}

/** Every shard of a stream (open and closed), paginated. */
export async function listStreamShards(kinesis: KinesisClient, streamName: string): Promise<Shard[]> {
  const shards: Shard[] = [];
  let token: string | undefined;
  do {
    const page = await kinesis.send(token ? new ListShardsCommand({ NextToken: token }) : new ListShardsCommand({ StreamName: streamName }));
    shards.push(...(page.Shards ?? []));
    token = page.NextToken;
  } while (token);
  return shards;
}
