/**
 * Stage 1 routes rows by a cached list of the internal stream's shards. After a reshard of that
 * stream, a record built for a closed shard lands in one of its children (Kinesis routes by the
 * explicit hash key): the sink must notice and fail the batch retryably with a fresh list, and the
 * child must ignore the record, whose rows are partly another shard's.
 */
import { describe, expect, it } from 'vitest';
import { RepartitionSink, type RepartitionChannel, type RepartitionRecordOut, type RepartitionTarget } from '../../lib/sinks/repartition-sink.js';
import { RepartitionShardSource } from '../../lib/sources/repartition-shard-source.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';

const MAX = (1n << 128n) - 1n;
const parent: RepartitionTarget = { shardId: 'shard-0', startingHashKey: 0n, endingHashKey: MAX };
const children: RepartitionTarget[] = [
  { shardId: 'shard-1', startingHashKey: 0n, endingHashKey: MAX / 2n },
  { shardId: 'shard-2', startingHashKey: MAX / 2n + 1n, endingHashKey: MAX },
];

/** The stream after a split, seen through a list that still has the parent until refreshed. */
class SplitStream implements RepartitionChannel {
  cached: RepartitionTarget[] = [parent];
  readonly landed = new Map<string, RepartitionRecordOut[]>(children.map((c) => [c.shardId, []]));
  refreshed = 0;
  async shards(): Promise<readonly RepartitionTarget[]> { return this.cached; }
  refresh(): void { this.refreshed++; this.cached = children; }
  async put(records: readonly RepartitionRecordOut[]): Promise<string[]> {
    return records.map((r) => {
      const hash = BigInt(r.explicitHashKey);
      const child = children.find((c) => hash >= c.startingHashKey && hash <= c.endingHashKey)!;
      this.landed.get(child.shardId)!.push(r);
      return child.shardId;
    });
  }
}

const batch = { partitionId: 'src-0', batchId: 0, rows: ['north', 'south', 'east', 'west', 'mall', 'harbor'].map((k) => [k, 1]), outputMode: 'append' } as never;

function asShardRecords(records: readonly RepartitionRecordOut[]): ShardRecord[] {
  return records.map((r, i) => ({ sequenceNumber: String(i + 1), partitionKey: r.partitionKey, dataBase64: Buffer.from(r.data).toString('base64'), approximateArrivalTimestampMs: 0 }));
}

describe('repartition records after a reshard of the internal stream', () => {
  it('a batch routed by a stale shard list fails retryably, refreshes the list, and goes out right the second time', async () => {
    const stream = new SplitStream();
    const sink = new RepartitionSink({ channel: stream, routingOrdinals: [0], eventTimeOrdinal: null });
    await expect(sink.addBatch(batch)).rejects.toMatchObject({ code: 'REPARTITION_RESHARDED', retryable: true });
    expect(stream.refreshed).toBe(1);
    await sink.addBatch(batch);
    // shard-1 got the stale record (built for shard-0, all six rows) and then its own.
    const source = new RepartitionShardSource('repartition', [{ name: 'k', type: 'string' }, { name: 'n', type: 'long' }], 'shard-1');
    source.offer(asShardRecords(stream.landed.get('shard-1')!));
    const end = source.latestOffset()!;
    const rows = source.getBatch(null, end).map((r) => r[0]);
    const other = new RepartitionShardSource('repartition', [{ name: 'k', type: 'string' }, { name: 'n', type: 'long' }], 'shard-2');
    other.offer(asShardRecords(stream.landed.get('shard-2')!));
    const otherRows = other.getBatch(null, other.latestOffset()!).map((r) => r[0]);
    // Each key once, on exactly one child: the stale record was ignored.
    expect([...rows, ...otherRows].sort()).toEqual(['east', 'harbor', 'mall', 'north', 'south', 'west']);
    expect(rows.length).toBeGreaterThan(0);
    expect(otherRows.length).toBeGreaterThan(0);
  });
});
