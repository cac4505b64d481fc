/**
 * S3FilesSink, S3SnapshotSink, S3DeadLetterWriter and their readers against s3rver (real SDK calls).
 */
import { HeadObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { beforeAll, describe, expect, it } from 'vitest';
import { S3DeadLetterWriter, deadLetterKey, readDeadLetters } from '../../lib/aws/s3-dead-letter-writer.js';
import { S3FilesSink, s3FilesDataKey, s3FilesManifestKey } from '../../lib/aws/s3-files-sink.js';
import { S3SnapshotSink, currentSnapshotHeader, s3CurrentSnapshotKey, s3SnapshotKey, s3SnapshotPointerKey } from '../../lib/aws/s3-snapshot-sink.js';
import { readS3FileBatches, readS3Files, readS3SnapshotPartitions, readS3Snapshots } from '../../lib/aws/sink-readers.js';
import { getObjectText, putObject } from '../../lib/aws/s3-util.js';
import type { EmulatorSet } from '../../lib/local/emulators.js';
import { useS3Emulator } from '../support/s3-emulator.js';
import { WINDOW_STRUCT, type StructField } from '../../lib/plan/data-types.js';
import { CostMeter } from '../../lib/core/cost-meter.js';
import type { OutputMode } from '../../lib/core/output-mode.js';
import type { SinkBatch } from '../../lib/sinks/sink.js';
import type { DeadLetterRecord } from '../../lib/sources/dead-letter.js';

const s3Emulator = useS3Emulator('sinks');
let emulators: EmulatorSet;
let s3: S3Client;
const newBucket = (): Promise<string> => s3Emulator.newBucket();

beforeAll(() => {
  emulators = s3Emulator.emulators;
  s3 = s3Emulator.s3;
});

async function allKeys(bucket: string): Promise<string[]> {
  const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket }));
  return (page.Contents ?? []).map((o) => o.Key!).sort();
}

const micros = (iso: string): number => Date.parse(iso) * 1000;

const eventSchema: StructField[] = [
  { name: 'store', type: 'string' },
  { name: 'amount', type: 'long' },
  { name: 'ts', type: 'timestamp' },
];

const windowSchema: StructField[] = [
  { name: 'window', type: WINDOW_STRUCT },
  { name: 'store', type: 'string' },
  { name: 'revenue', type: 'long' },
];

function batch(
  partitionId: string, batchId: number, rows: unknown[][], schema: StructField[] = eventSchema, outputMode: OutputMode = 'append',
): SinkBatch {
  return { partitionId, batchId, rows, schema, columns: schema.map((f) => f.name), outputMode };
}

function win(startIso: string, endIso: string): { start: number; end: number } {
  return { start: micros(startIso), end: micros(endIso) };
}

describe('S3FilesSink', () => {
  it('stages one JSON Lines object and writes one manifest entry per batch at deterministic keys; the commit reveals it', async () => {
    const bucket = await newBucket();
    const meter = new CostMeter();
    const sink = new S3FilesSink({ client: s3, bucket, prefix: 'out/revenue', meter });
    expect(sink.description).toBe(`S3FilesSink[s3://${bucket}/out/revenue/, jsonl]`);
    expect(sink.supportedOutputModes).toEqual(['append']);

    await sink.addBatch(batch('shardId-000000000000', 0, [
      ['north', 15, micros('2024-05-01T14:40:00Z')],
      ['south', 7, micros('2024-05-01T14:41:00Z') + 123],
    ]));
    const stagedKey = 'out/revenue/_sluice_staging/partition=shardId-000000000000/000000000000/0.jsonl.staged';
    expect(await allKeys(bucket)).toEqual([
      'out/revenue/_sluice_metadata/partition=shardId-000000000000/000000000000.json',
      stagedKey,
    ]);
    const dataKey = s3FilesDataKey('out/revenue/', '', 'shardId-000000000000', 0);
    expect(dataKey).toBe('out/revenue/part-shardId-000000000000-000000000000.jsonl');
    const body = await getObjectText(s3, bucket, stagedKey);
    expect(body).toBe(
      '{"store":"north","amount":15,"ts":"2024-05-01T14:40:00Z"}\n'
      + '{"store":"south","amount":7,"ts":"2024-05-01T14:41:00.000123Z"}\n',
    );
    const manifest = JSON.parse((await getObjectText(s3, bucket, s3FilesManifestKey('out/revenue/', 'shardId-000000000000', 0)))!);
    expect(manifest).toEqual({
      formatVersion: 2, partitionId: 'shardId-000000000000', batchId: 0, format: 'jsonl',
      files: [{ key: dataKey, stagedKey, rows: 2, bytes: Buffer.byteLength(body!), partition: {} }],
    });
    // One HEAD (is the batch committed?) and two PUTs (data, then manifest entry).
    expect(meter.snapshot()).toEqual({ s3Gets: 1, s3Puts: 2 });
    // The checkpoint commit reveals it: one COPY (priced as a PUT). The staged object stays until
    // the scheduled sweep (a racing reveal of the same batch may still be copying it).
    await sink.onCommitted('shardId-000000000000', 0);
    expect(await allKeys(bucket)).toEqual(['out/revenue/_sluice_metadata/partition=shardId-000000000000/000000000000.json', stagedKey, dataKey].sort());
    expect(await getObjectText(s3, bucket, dataKey)).toBe(body);
    expect(meter.snapshot()).toEqual({ s3Gets: 1, s3Puts: 3 });
  });

  it('writes a batch written twice once, and the re-run costs one HEAD', async () => {
    const bucket = await newBucket();
    const meter = new CostMeter();
    const sink = new S3FilesSink({ client: s3, bucket, prefix: 'p/', meter });
    const b = batch('shard-a', 3, [['north', 1, micros('2024-05-01T00:00:00Z')]]);
    await sink.addBatch(b);
    const before = meter.snapshot();
    await sink.addBatch(b);
    expect(meter.since(before)).toEqual({ s3Gets: 1 });
    // A new sink instance (a new Lambda container) also recognises the committed batch.
    await new S3FilesSink({ client: s3, bucket, prefix: 'p/' }).addBatch(b);
    expect(await readS3Files(s3, bucket, 'p/')).toEqual([{ store: 'north', amount: 1, ts: '2024-05-01T00:00:00Z' }]);
  });

  it('a run of a higher revision (records expired between runs) replaces the entry of a lower one, and a stale lower run writes nothing', async () => {
    const bucket = await newBucket();
    const sink = new S3FilesSink({ client: s3, bucket, prefix: 'p/' });
    const ts = micros('2024-05-01T00:00:00Z');
    // Batch 3's first run held 3 records and died after its entry; 2 expired; the run over the last one commits.
    await sink.addBatch(batch('shard-a', 3, [['north', 1, ts], ['south', 2, ts], ['east', 3, ts]]));
    const committed = { ...batch('shard-a', 3, [['east', 3, ts]]), revision: 2 };
    await new S3FilesSink({ client: s3, bucket, prefix: 'p/' }).addBatch(committed);
    // The first run wakes and writes again; then the commit is revealed by a container that did not write it.
    await sink.addBatch(batch('shard-a', 3, [['north', 1, ts], ['south', 2, ts], ['east', 3, ts]]));
    await new S3FilesSink({ client: s3, bucket, prefix: 'p/' }).onCommitted('shard-a', 3);
    expect(await readS3Files(s3, bucket, 'p/')).toEqual([{ store: 'east', amount: 3, ts: '2024-05-01T00:00:00Z' }]);
    expect(JSON.parse((await getObjectText(s3, bucket, s3FilesManifestKey('p/', 'shard-a', 3)))!)).toMatchObject({ revision: 2, files: [{ rows: 1 }] });
  });

  it('reads committed batches in partition then batch order and ignores data objects with no manifest entry', async () => {
    const bucket = await newBucket();
    const sink = new S3FilesSink({ client: s3, bucket, prefix: 'q' });
    const row = (store: string, amount: number): unknown[] => [store, amount, micros('2024-05-01T12:00:00Z')];
    await sink.addBatch(batch('shard-b', 1, [row('b1', 1)]));
    await sink.addBatch(batch('shard-a', 10, [row('a10', 10)]));
    await sink.addBatch(batch('shard-a', 2, [row('a2', 2), row('a2', 3)]));
    await sink.addBatch(batch('shard-b', 0, [row('b0', 0)]));
    // A crash between the data PUT and the manifest PUT leaves an uncommitted data object.
    await s3.send(new PutObjectCommand({
      Bucket: bucket, Key: 'q/_sluice_staging/partition=shard-a/000000000011/0.jsonl.staged',
      Body: `${JSON.stringify({ store: 'uncommitted', amount: 99, ts: '2024-05-01T12:00:00Z' })}\n`,
    }));
    const rows = await readS3Files(s3, bucket, 'q');
    expect(rows.map((r) => `${r.store}:${r.amount}`)).toEqual(['a2:2', 'a2:3', 'a10:10', 'b0:0', 'b1:1']);
    const batches = await readS3FileBatches(s3, bucket, 'q/');
    expect(batches.map((b) => `${b.partitionId}/${b.batchId}`)).toEqual(['shard-a/2', 'shard-a/10', 'shard-b/0', 'shard-b/1']);

    // The runtime re-runs batch 11 after the crash: the same key is rewritten, then committed.
    await sink.addBatch(batch('shard-a', 11, [row('a11', 11)]));
    expect((await readS3Files(s3, bucket, 'q')).map((r) => r.store)).toEqual(['a2', 'a2', 'a10', 'a11', 'b0', 'b1']);
  });

  it('records an empty batch as a manifest entry with no files', async () => {
    const bucket = await newBucket();
    const sink = new S3FilesSink({ client: s3, bucket, prefix: '' });
    await sink.addBatch(batch('shardId-1', 0, []));
    expect(await allKeys(bucket)).toEqual(['_sluice_metadata/partition=shardId-1/000000000000.json']);
    expect(JSON.parse((await getObjectText(s3, bucket, '_sluice_metadata/partition=shardId-1/000000000000.json'))!))
      .toEqual({ formatVersion: 2, partitionId: 'shardId-1', batchId: 0, format: 'jsonl', files: [] });
    expect(await readS3FileBatches(s3, bucket, '')).toEqual([{ partitionId: 'shardId-1', batchId: 0, rows: [] }]);
  });

  it('writes window structs as objects with ISO timestamps, nulls and arrays as JSON', async () => {
    const bucket = await newBucket();
    const schema: StructField[] = [
      ...windowSchema,
      { name: 'tags', type: { kind: 'array', element: 'string' } },
      { name: 'avg', type: 'double' },
    ];
    const sink = new S3FilesSink({ client: s3, bucket, prefix: 'w/' });
    await sink.addBatch(batch('s', 0, [
      [win('2024-05-01T14:00:00Z', '2024-05-01T15:00:00Z'), 'north', 15, ['a', 'b'], 1.5],
      [win('2024-05-01T15:00:00Z', '2024-05-01T16:00:00Z'), null, 0, null, null],
    ], schema));
    expect(await readS3Files(s3, bucket, 'w/')).toEqual([
      { window: { start: '2024-05-01T14:00:00Z', end: '2024-05-01T15:00:00Z' }, store: 'north', revenue: 15, tags: ['a', 'b'], avg: 1.5 },
      { window: { start: '2024-05-01T15:00:00Z', end: '2024-05-01T16:00:00Z' }, store: null, revenue: 0, tags: null, avg: null },
    ]);
  });

  it('percent-encodes a partition id that is not URL-safe and reads it back', async () => {
    const bucket = await newBucket();
    const sink = new S3FilesSink({ client: s3, bucket, prefix: 'enc/' });
    await sink.addBatch(batch('a/b c', 0, [['x', 1, 0]]));
    await sink.onCommitted('a/b c', 0);
    expect(await allKeys(bucket)).toContain('enc/part-a%2Fb%20c-000000000000.jsonl');
    expect((await readS3FileBatches(s3, bucket, 'enc/'))[0]!.partitionId).toBe('a/b c');
  });

  it('a crash between the data and manifest writes leaves nothing visible; the re-run commits once', async () => {
    const bucket = await newBucket();
    // A real client with SDK retries off; one injected failure on the first manifest-entry PUT.
    const client = new S3Client({
      region: emulators.clientOptions.region, endpoint: emulators.endpoints.s3, forcePathStyle: true,
      credentials: emulators.clientOptions.credentials, maxAttempts: 1,
    });
    let injected = 0;
    client.middlewareStack.add((next, context) => async (args) => {
      const key = (args.input as { Key?: string }).Key ?? '';
      if (context.commandName === 'PutObjectCommand' && key.includes('_sluice_metadata/') && injected === 0) {
        injected++;
        throw new S3ServiceException({ name: 'SlowDown', $fault: 'server', message: 'Please reduce your request rate. (injected)', $metadata: { httpStatusCode: 503 } });
      }
      return next(args);
    }, { step: 'initialize', name: 'injectOneSlowDown' });
    try {
      const sink = new S3FilesSink({ client, bucket, prefix: 'c/' });
      const b = batch('p', 0, [['north', 1, 0], ['south', 2, 0]]);
      await expect(sink.addBatch(b)).rejects.toMatchObject({ code: 'SINK_THROTTLED', retryable: true });
      expect(await allKeys(bucket)).toEqual(['c/_sluice_staging/partition=p/000000000000/0.jsonl.staged']);
      expect(await readS3Files(s3, bucket, 'c/')).toEqual([]);
      await sink.addBatch(b);
      await sink.addBatch(b);
      expect((await readS3Files(s3, bucket, 'c/')).map((r) => r.store)).toEqual(['north', 'south']);
    } finally {
      client.destroy();
    }
  });

  it('Parquet: a row whose value its type cannot hold, or whose key would pass 1,024 bytes, is declared through rowLimits (no data values); a batch holding one writes nothing', async () => {
    const bucket = await newBucket();
    const sink = new S3FilesSink({ client: s3, bucket, prefix: 'pq/', format: 'parquet', partitionBy: ['store'] });
    const longName = 'x'.repeat(1100);
    const mixed = batch('s', 0, [['north', 1, 0], ['north', 1.5, 0], [longName, 2, 0], ['south', 3, micros('2024-05-01T00:00:00Z')]]);
    const refusals = mixed.rows.map((_, i) => sink.rowLimits.check(mixed, i));
    expect(refusals).toEqual([
      null,
      { code: 'SINK_VALUE_NOT_ENCODABLE', reason: 'amount: the value is not an exact 64-bit integer (Parquet INT64)' },
      { code: 'SINK_KEY_TOO_LONG', reason: expect.stringMatching(/^the row's file key is \d+ bytes; S3 allows 1024/) },
      null,
    ]);
    expect(JSON.stringify(refusals)).not.toContain('1.5');
    // A row's key is its content: the same in a re-run that leaves other rows out.
    expect(sink.rowLimits.rowKey(mixed, 1)).toBe(sink.rowLimits.rowKey(batch('s', 0, [['north', 1.5, 0]]), 0));
    expect(sink.rowLimits.rowKey(mixed, 0)).not.toBe(sink.rowLimits.rowKey(mixed, 1));

    await expect(sink.addBatch(mixed)).rejects.toMatchObject({ code: 'SINK_ROWS_UNWRITABLE', retryable: false });
    expect(await allKeys(bucket)).toEqual([]);
    // The batch without the refused rows (what the dead-letter policy re-runs) is written.
    await sink.addBatch(batch('s', 0, [mixed.rows[0]!, mixed.rows[3]!] as unknown[][]));
    await sink.onCommitted('s', 0);
    expect((await allKeys(bucket)).filter((k) => k.endsWith('.parquet'))).toEqual([
      'pq/store=north/part-s-000000000000.parquet', 'pq/store=south/part-s-000000000000.parquet',
    ]);
    expect((await allKeys(bucket)).some((k) => k.includes('_sluice_rejected'))).toBe(false);
    expect(await readS3Files(s3, bucket, 'pq/')).toEqual([
      { store: 'north', amount: 1, ts: '1970-01-01T00:00:00Z' },
      { store: 'south', amount: 3, ts: '2024-05-01T00:00:00Z' },
    ]);
  });

  it('refuses update and complete batches', async () => {
    const sink = new S3FilesSink({ client: s3, bucket: 'unused', prefix: '' });
    await expect(sink.addBatch(batch('s', 0, [], eventSchema, 'update'))).rejects.toMatchObject({ code: 'SINK_OUTPUT_MODE_UNSUPPORTED' });
  });

  it('surfaces a missing bucket as a non-retryable error', async () => {
    const sink = new S3FilesSink({ client: s3, bucket: 'no-such-bucket-here', prefix: '' });
    await expect(sink.addBatch(batch('s', 0, [['x', 1, 0]]))).rejects.toMatchObject({ retryable: false });
  });
});

describe('S3SnapshotSink', () => {
  const snap = (partitionId: string, batchId: number, rows: unknown[][]): SinkBatch =>
    batch(partitionId, batchId, rows, windowSchema, 'complete');
  const w1 = win('2024-05-01T14:00:00Z', '2024-05-01T15:00:00Z');
  const w2 = win('2024-05-01T15:00:00Z', '2024-05-01T16:00:00Z');

  it('replaces the partition\'s one object with the whole result, one PUT per batch, batch id and rows in its metadata', async () => {
    const bucket = await newBucket();
    const meter = new CostMeter();
    const sink = new S3SnapshotSink({ client: s3, bucket, prefix: 'agg', meter });
    expect(sink.supportedOutputModes).toEqual(['complete']);
    await sink.addBatch(snap('shard-0', 0, [[w1, 'north', 15]]));
    // A HEAD finds no current object, a GET finds no format-1 pointer, one PUT.
    expect(meter.snapshot()).toEqual({ s3Gets: 2, s3Puts: 1 });
    expect(await allKeys(bucket)).toEqual(['agg/current/partition=shard-0.jsonl']);
    const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: s3CurrentSnapshotKey('agg/', 'shard-0') }));
    expect(head.Metadata).toEqual({ 'sluice-batch-id': '0', 'sluice-rows': '1', 'sluice-format': '2' });
    const before = meter.snapshot();
    await sink.addBatch(snap('shard-0', 1, [[w1, 'north', 20], [w2, 'north', 5]]));
    expect(meter.since(before)).toEqual({ s3Gets: 1, s3Puts: 1 });
    expect(await allKeys(bucket)).toEqual(['agg/current/partition=shard-0.jsonl']);
    expect(await readS3Snapshots(s3, bucket, 'agg')).toEqual([
      { window: { start: '2024-05-01T14:00:00Z', end: '2024-05-01T15:00:00Z' }, store: 'north', revenue: 20 },
      { window: { start: '2024-05-01T15:00:00Z', end: '2024-05-01T16:00:00Z' }, store: 'north', revenue: 5 },
    ]);
  });

  it('after a split and a merge, a reader sees per key the newest committed value: a parent\'s rows give way to its children\'s as each publishes', async () => {
    const bucket = await newBucket();
    // Shard p split into c1 (north, south) and c2 (east), then c1 and c2 merged into m.
    const lineage: Record<string, string[]> = { p: [], c1: ['p'], c2: ['p'], m: ['c1', 'p', 'c2'] };
    let lookups = 0;
    const sink = new S3SnapshotSink({
      client: s3, bucket, prefix: 'rs/', keyColumns: ['window', 'store'],
      ancestorsOf: async (partitionId) => { lookups++; return lineage[partitionId]!; },
    });
    const answer = async () => (await readS3Snapshots(s3, bucket, 'rs/')).map((r) => `${r.store}:${r.revenue}`).sort();
    await sink.addBatch(snap('p', 0, [[w1, 'north', 1], [w1, 'south', 2], [w1, 'east', 3]]));
    await sink.addBatch(snap('p', 1, [[w1, 'north', 10], [w1, 'south', 2], [w1, 'east', 3]]));
    // c1 publishes its range (the parent's rows, one changed, one new group); c2 has not run yet.
    await sink.addBatch(snap('c1', 1, [[w1, 'north', 11], [w1, 'south', 2], [w2, 'south', 4]]));
    expect(await answer()).toEqual(['east:3', 'north:11', 'south:2', 'south:4']);
    await sink.addBatch(snap('c2', 1, [[w1, 'east', 30]]));
    expect(await answer()).toEqual(['east:30', 'north:11', 'south:2', 'south:4']);
    await sink.addBatch(snap('c1', 2, [[w1, 'north', 12], [w1, 'south', 2], [w2, 'south', 4]]));
    await sink.addBatch(snap('m', 1, [[w1, 'north', 12], [w1, 'south', 2], [w2, 'south', 4], [w1, 'east', 31]]));
    expect(await answer()).toEqual(['east:31', 'north:12', 'south:2', 'south:4']);
    // The lineage is looked up once per partition, at its first publish, and kept in its metadata.
    expect(lookups).toBe(4);
    const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: s3CurrentSnapshotKey('rs/', 'm') }));
    expect(currentSnapshotHeader(head.Metadata ?? {}, 'm')).toMatchObject({
      ancestors: ['c1', 'p', 'c2'], keyColumns: ['window', 'store'],
    });
  });

    it('never moves back: an older batch, or the same batch again, is a no-op', async () => {
    const bucket = await newBucket();
    const meter = new CostMeter();
    const sink = new S3SnapshotSink({ client: s3, bucket, prefix: 'agg/', meter });
    await sink.addBatch(snap('p', 5, [[w1, 'north', 50]]));
    const before = meter.snapshot();
    await sink.addBatch(snap('p', 4, [[w1, 'north', 40]]));
    await sink.addBatch(snap('p', 5, [[w1, 'north', 51]]));
    expect(meter.since(before)).toEqual({ s3Gets: 2 }); // two HEADs, nothing written
    const [current] = await readS3SnapshotPartitions(s3, bucket, 'agg/');
    expect(current).toEqual({ partitionId: 'p', batchId: 5, rows: [expect.objectContaining({ revenue: 50 })] });
  });

  it('takes over a partition written in format 1: honours its pointer, then deletes the pointer and its snapshots', async () => {
    const bucket = await newBucket();
    const pointer = s3SnapshotPointerKey('agg/', 'p');
    const old = s3SnapshotKey('agg/', 'p', 7);
    await putObject(s3, bucket, old, `${JSON.stringify({ store: 'north', revenue: 70 })}\n`, 'application/x-ndjson');
    await putObject(s3, bucket, s3SnapshotKey('agg/', 'p', 6), `${JSON.stringify({ store: 'north', revenue: 60 })}\n`, 'application/x-ndjson');
    await putObject(s3, bucket, pointer, JSON.stringify({ formatVersion: 1, partitionId: 'p', batchId: 7, key: old, rows: 1 }), 'application/json');
    await putObject(s3, bucket, s3SnapshotPointerKey('agg/', 'q'), JSON.stringify({ formatVersion: 1, partitionId: 'q', batchId: 2, key: s3SnapshotKey('agg/', 'q', 2), rows: 1 }), 'application/json');
    await putObject(s3, bucket, s3SnapshotKey('agg/', 'q', 2), `${JSON.stringify({ store: 'south', revenue: 2 })}\n`, 'application/x-ndjson');
    const sink = new S3SnapshotSink({ client: s3, bucket, prefix: 'agg/' });
    await sink.addBatch(snap('p', 7, [[w1, 'north', 99]])); // published in format 1 already: a no-op
    expect((await readS3SnapshotPartitions(s3, bucket, 'agg/')).map((p) => [p.partitionId, p.batchId, p.rows])).toEqual([
      ['p', 7, [{ store: 'north', revenue: 70 }]], ['q', 2, [{ store: 'south', revenue: 2 }]],
    ]);
    await sink.addBatch(snap('p', 8, [[w1, 'north', 80]]));
    expect(sink.lastCleanupError).toBeUndefined();
    expect((await allKeys(bucket)).filter((k) => k.includes('partition=p'))).toEqual(['agg/current/partition=p.jsonl']);
    expect((await readS3SnapshotPartitions(s3, bucket, 'agg/')).map((p) => [p.partitionId, p.batchId, p.rows.length])).toEqual([['p', 8, 1], ['q', 2, 1]]);
  });

  it('replaces a snapshot of the same batch only with a higher revision (records expired between runs): the committed run stays', async () => {
    const bucket = await newBucket();
    const sink = new S3SnapshotSink({ client: s3, bucket, prefix: 'agg' });
    await sink.addBatch(snap('shard-0', 4, [[w1, 'north', 45]])); // the run over all planned records, never committed
    await sink.addBatch({ ...snap('shard-0', 4, [[w1, 'north', 20]]), revision: 2 }); // the run after 2 expired: committed
    await sink.addBatch(snap('shard-0', 4, [[w1, 'north', 45]])); // the first run wakes
    expect(await readS3Snapshots(s3, bucket, 'agg')).toEqual([{ window: { start: '2024-05-01T14:00:00Z', end: '2024-05-01T15:00:00Z' }, store: 'north', revenue: 20 }]);
    const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: s3CurrentSnapshotKey('agg/', 'shard-0') }));
    expect(head.Metadata).toMatchObject({ 'sluice-batch-id': '4', 'sluice-revision': '2' });
    await sink.addBatch(snap('shard-0', 5, [[w1, 'north', 21]]));
    expect((await readS3Snapshots(s3, bucket, 'agg')).map((r) => r.revenue)).toEqual([21]);
  });

  it('keeps partitions apart, and an empty result is an empty snapshot', async () => {
    const bucket = await newBucket();
    const sink = new S3SnapshotSink({ client: s3, bucket, prefix: 'agg/' });
    await sink.addBatch(snap('shard-1', 0, [[w1, 'south', 3]]));
    await sink.addBatch(snap('shard-0', 0, [[w1, 'north', 1]]));
    await sink.addBatch(snap('shard-0', 1, []));
    const parts = await readS3SnapshotPartitions(s3, bucket, 'agg/');
    expect(parts.map((p) => [p.partitionId, p.batchId, p.rows.length])).toEqual([['shard-0', 1, 0], ['shard-1', 0, 1]]);
    expect(await readS3Snapshots(s3, bucket, 'agg/')).toEqual([expect.objectContaining({ store: 'south', revenue: 3 })]);
  });

  it('refuses append batches', async () => {
    const sink = new S3SnapshotSink({ client: s3, bucket: 'unused', prefix: '' });
    await expect(sink.addBatch(batch('s', 0, []))).rejects.toMatchObject({ code: 'SINK_OUTPUT_MODE_UNSUPPORTED' });
  });
});

describe('S3DeadLetterWriter', () => {
  const record = (shardId: string, sequenceNumber: string, reason: string): DeadLetterRecord => ({
    queryName: 'revenue', shardId, sequenceNumber, partitionKey: 'north',
    approximateArrivalTimestampMs: 1_714_574_400_123, dataBase64: Buffer.from('{"store":').toString('base64'), reason,
  });

  it('writes one object per record at its identity key, and reads them back in order', async () => {
    const bucket = await newBucket();
    const meter = new CostMeter();
    const writer = new S3DeadLetterWriter({ client: s3, bucket, prefix: 'dead-letter', meter });
    const records = [
      record('shardId-000000000001', '49590338271490256608559692538361571095921575989136588898', 'bad JSON'),
      record('shardId-000000000000', '9', 'amount: expected long, got "x"'),
      record('shardId-000000000000', '10', 'ts: impossible timestamp'),
    ];
    await writer.write(records);
    expect(meter.snapshot()).toEqual({ s3Puts: 3 });
    expect(await allKeys(bucket)).toEqual([
      'dead-letter/revenue/shardId-000000000000/10.json',
      'dead-letter/revenue/shardId-000000000000/9.json',
      'dead-letter/revenue/shardId-000000000001/49590338271490256608559692538361571095921575989136588898.json',
    ]);
    expect(deadLetterKey('dead-letter/', records[1]!)).toBe('dead-letter/revenue/shardId-000000000000/9.json');
    // A re-run batch writes the same records again: still one object each.
    await writer.write([records[1]!, records[1]!]);
    const read = await readDeadLetters(s3, bucket, 'dead-letter/');
    expect(read).toEqual([records[1], records[2], records[0]]);
    expect(Buffer.from(read[0]!.dataBase64, 'base64').toString()).toBe('{"store":');
  });
});
