/**
 * The internal stream resharded between two PutRecords calls of one stage-1 batch: some of the
 * batch's records reached the parents, the rest land in a child, stage 1 sends the batch again by
 * the new shard list, and each child starts from its parents' progress. Every row must be applied
 * exactly once over the parents and the children. Progress kept per (source shard, batch, part)
 * lost rows here: a merge child took the progress of the parent that had the batch and skipped the
 * other parent's rows; a split child skipped its re-sent part 0 because its parent had applied a
 * part 0 (a different one).
 */
import { describe, expect, it } from 'vitest';
import { RepartitionSink, type RepartitionChannel, type RepartitionRecordOut, type RepartitionTarget } from '../../lib/sinks/repartition-sink.js';
import { RepartitionShardSource, seedRepartitionOffset } from '../../lib/sources/repartition-shard-source.js';
import type { Offset } from '../../lib/sources/source.js';
import { kinesisHashKey, repartitionRoutingKey } from '../../lib/state/state-routing.js';

const MAX = (1n << 128n) - 1n;
const MID = MAX / 2n;

interface FakeShard { readonly target: RepartitionTarget; readonly records: RepartitionRecordOut[]; closed: boolean; parents: string[] }

/** An internal stream whose shards can be split or merged between two records of one PutRecords call. */
class FakeStream implements RepartitionChannel {
  readonly shardsById = new Map<string, FakeShard>();
  private listed: RepartitionTarget[] = [];
  private puts = 0;
  private next = 0;
  /** Runs before the record with this index (over all puts) is written. */
  beforeRecord: (index: number) => void = () => {};

  constructor(ranges: readonly [bigint, bigint][]) {
    for (const [start, end] of ranges) this.add(start, end, []);
    this.refresh();
  }

  add(start: bigint, end: bigint, parents: string[]): string {
    const shardId = `shard-${this.next++}`;
    this.shardsById.set(shardId, { target: { shardId, startingHashKey: start, endingHashKey: end }, records: [], closed: false, parents });
    return shardId;
  }

  split(shardId: string, at: bigint): void {
    const s = this.shardsById.get(shardId)!;
    s.closed = true;
    this.add(s.target.startingHashKey, at - 1n, [shardId]);
    this.add(at, s.target.endingHashKey, [shardId]);
  }

  merge(a: string, b: string): void {
    const [x, y] = [this.shardsById.get(a)!, this.shardsById.get(b)!];
    x.closed = true;
    y.closed = true;
    this.add(x.target.startingHashKey, y.target.endingHashKey, [a, b]);
  }

  async shards(): Promise<readonly RepartitionTarget[]> { return this.listed; }
  refresh(): void { this.listed = [...this.shardsById.values()].filter((s) => !s.closed).map((s) => s.target); }

  async put(records: readonly RepartitionRecordOut[]): Promise<string[]> {
    return records.map((r) => {
      this.beforeRecord(this.puts++);
      const hash = BigInt(r.explicitHashKey);
      const open = [...this.shardsById.values()].find((s) => !s.closed && hash >= s.target.startingHashKey && hash <= s.target.endingHashKey)!;
      open.records.push(r);
      return open.target.shardId;
    });
  }
}

const schema = [{ name: 'k', type: 'string' as const }, { name: 'n', type: 'long' as const }];
const hashOf = (row: readonly unknown[]): bigint => kinesisHashKey(repartitionRoutingKey([row[0]]));

/** Stage 2 over the fake stream: parents first, each child seeded from its parents' committed offsets. */
function applyAll(stream: FakeStream): string[] {
  const ends = new Map<string, Offset | null>();
  const applied: string[] = [];
  const order = [...stream.shardsById.keys()]; // created parents first
  for (const shardId of order) {
    const shard = stream.shardsById.get(shardId)!;
    const source = new RepartitionShardSource('repartition', schema, shardId, undefined, undefined, hashOf);
    let start: Offset | null = null;
    if (shard.parents.length > 0) {
      start = seedRepartitionOffset(shardId, { start: shard.target.startingHashKey, end: shard.target.endingHashKey }, shard.parents.map((p) => ({
        offset: ends.get(p) ?? null,
        range: { start: stream.shardsById.get(p)!.target.startingHashKey, end: stream.shardsById.get(p)!.target.endingHashKey },
      })));
      source.setCommitted(start);
    }
    source.offer(shard.records.map((r, i) => ({ sequenceNumber: String(i + 1), partitionKey: r.partitionKey, dataBase64: Buffer.from(r.data).toString('base64'), approximateArrivalTimestampMs: 0 })));
    const end = source.latestOffset();
    if (end && end !== start) applied.push(...source.getBatch(start, end).map((r) => `${String(r[0])}:${String(r[1])}`));
    ends.set(shardId, end);
  }
  return applied.sort();
}

const rowsOf = (batch: number, keys: number): unknown[][] => Array.from({ length: keys }, (_, i) => [`key-${i}`, batch * 1000 + i]);
const batchOf = (batchId: number, rows: unknown[][]) => ({ partitionId: 'src-0', batchId, rows, outputMode: 'append' }) as never;

/** Sends `batchId` as stage 1 does: a REPARTITION_RESHARDED failure is retried with the new list. */
async function send(sink: RepartitionSink, batchId: number, rows: unknown[][]): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    try {
      await sink.addBatch(batchOf(batchId, rows));
      return attempt;
    } catch (error) {
      if ((error as { code?: string }).code !== 'REPARTITION_RESHARDED' || attempt > 3) throw error;
    }
  }
}

const expected = (batches: number, keys: number): string[] => Array.from({ length: batches }, (_, b) => rowsOf(b, keys))
  .flat().map((r) => `${String(r[0])}:${String(r[1])}`).sort();

describe('the internal stream resharded between PutRecords calls of one stage-1 batch', () => {
  it('a merge after the first parent got the batch and before the second did: every row once', async () => {
    const stream = new FakeStream([[0n, MID], [MID + 1n, MAX]]);
    const sink = new RepartitionSink({ channel: stream, routingOrdinals: [0], eventTimeOrdinal: null });
    await send(sink, 0, rowsOf(0, 40));
    // Batch 1: its first record (shard-0's) is written, then the two shards merge.
    stream.beforeRecord = (i) => { if (i === 3) stream.merge('shard-0', 'shard-1'); };
    expect(await send(sink, 1, rowsOf(1, 40))).toBe(2);
    stream.beforeRecord = () => {};
    await send(sink, 2, rowsOf(2, 40));
    expect(stream.shardsById.get('shard-0')!.records.length).toBe(2);
    expect(applyAll(stream)).toEqual(expected(3, 40));
  });

  it('a split between the parts of a large batch: every row once, the children taking the parts their parent had not', async () => {
    const stream = new FakeStream([[0n, MAX]]);
    // Parts of about 10 rows: batch 1 goes out as several records, each one hash range's rows.
    const sink = new RepartitionSink({ channel: stream, routingOrdinals: [0], eventTimeOrdinal: null, maxRecordBytes: 200 });
    await send(sink, 0, rowsOf(0, 40));
    const before = stream.shardsById.get('shard-0')!.records.length;
    expect(before).toBeGreaterThan(2);
    stream.beforeRecord = (i) => { if (i === before + 1) stream.split('shard-0', MID); };
    expect(await send(sink, 1, rowsOf(1, 40))).toBe(2);
    stream.beforeRecord = () => {};
    await send(sink, 2, rowsOf(2, 40));
    expect(applyAll(stream)).toEqual(expected(3, 40));
  });

  it('a split, then a merge of the children, at every pair of points between the records of one batch', async () => {
    let tried = 0;
    for (let splitAt = 0; splitAt < 5; splitAt++) {
      for (let mergeAt = splitAt + 1; mergeAt < splitAt + 5; mergeAt++) {
        const stream = new FakeStream([[0n, MAX]]);
        const sink = new RepartitionSink({ channel: stream, routingOrdinals: [0], eventTimeOrdinal: null, maxRecordBytes: 200 });
        await send(sink, 0, rowsOf(0, 30));
        const before = stream.shardsById.get('shard-0')!.records.length;
        stream.beforeRecord = (i) => {
          if (i === before + splitAt) stream.split('shard-0', MID / 3n);
          if (i === before + mergeAt && stream.shardsById.size === 3) stream.merge('shard-1', 'shard-2');
        };
        await send(sink, 1, rowsOf(1, 30));
        stream.beforeRecord = () => {};
        await send(sink, 2, rowsOf(2, 30));
        expect(applyAll(stream), `split before record ${splitAt}, merge before record ${mergeAt} of batch 1`).toEqual(expected(3, 30));
        if (stream.shardsById.size === 4) tried++;
      }
    }
    expect(tried).toBeGreaterThan(10);
  });

  it('a single key whose rows outgrow a record is sent as numbered parts of its one hash, applied once', async () => {
    const stream = new FakeStream([[0n, MAX]]);
    const sink = new RepartitionSink({ channel: stream, routingOrdinals: [0], eventTimeOrdinal: null, maxRecordBytes: 100 });
    const hot = Array.from({ length: 20 }, (_, i) => ['hot', i]);
    await send(sink, 0, [...hot, ...rowsOf(0, 5)]);
    const records = stream.shardsById.get('shard-0')!.records;
    // Sent twice, as a PutRecords retry may: still once each.
    records.push(...records);
    expect(applyAll(stream)).toEqual([...hot.map((r) => `${String(r[0])}:${String(r[1])}`), ...expected(1, 5)].sort());
  });
});
