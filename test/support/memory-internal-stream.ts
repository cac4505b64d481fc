/**
 * An internal Kinesis stream in memory for the stage tests: shards with hash ranges, records in
 * order, and optionally a duplicate of every n-th record (as a PutRecords retry delivers).
 */
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import type { RepartitionChannel, RepartitionRecordOut, RepartitionTarget } from '../../lib/sinks/repartition-sink.js';

export class MemoryInternalStream implements RepartitionChannel {
  readonly records = new Map<string, ShardRecord[]>();
  private seq = 1n;
  private n = 0;
  constructor(private readonly targets: RepartitionTarget[], private readonly duplicateEvery = 0) {
    for (const t of targets) this.records.set(t.shardId, []);
  }
  static withShards(k: number, duplicateEvery = 0): MemoryInternalStream {
    const span = (2n ** 128n) / BigInt(k);
    return new MemoryInternalStream(Array.from({ length: k }, (_, i) => ({
      shardId: `internal-${i}`, startingHashKey: span * BigInt(i), endingHashKey: i === k - 1 ? 2n ** 128n - 1n : span * BigInt(i + 1) - 1n,
    })), duplicateEvery);
  }
  async shards(): Promise<readonly RepartitionTarget[]> { return this.targets; }
  async put(records: readonly RepartitionRecordOut[]): Promise<void> {
    for (const r of records) {
      const hash = BigInt(r.explicitHashKey);
      const target = this.targets.find((t) => hash >= t.startingHashKey && hash <= t.endingHashKey)!;
      const copies = this.duplicateEvery > 0 && ++this.n % this.duplicateEvery === 0 ? 2 : 1;
      for (let c = 0; c < copies; c++) {
        this.records.get(target.shardId)!.push({
          sequenceNumber: String(this.seq++), partitionKey: r.partitionKey, dataBase64: Buffer.from(r.data).toString('base64'), approximateArrivalTimestampMs: 0,
        });
      }
    }
  }
}

