/**
 * The files sink as a lake table, end to end on the emulators: Kinesis → the Lambda handler →
 * Parquet in Hive folders on s3rver, read by DuckDB (a reader Sluice did not write) listing the
 * whole table location. DuckDB must return exactly the rows the in-memory engine emits, with the
 * types Spark would write, and never a row of a batch that has not committed.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineQuery, type StreamingQueryDefinition } from '../../lib/query/query-definition.js';
import { SluiceSession } from '../../lib/api/session.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { col, split, substring, window } from '../../lib/plan/functions.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { parseTimestamp } from '../../lib/core/timestamps.js';
import type { Sink, SinkBatch } from '../../lib/sinks/sink.js';
import type { PartitionBackends } from '../../lib/query/partition-backends.js';
import { readS3Files } from '../../lib/aws/sink-readers.js';
import { listKeys } from '../../lib/aws/s3-util.js';
import { compactFiles } from '../../lib/aws/s3-compaction.js';
import { sweepRevealedStaging } from '../../lib/aws/s3-staged-sweep.js';
import { S3Client } from '@aws-sdk/client-s3';
import { deploy, type Deployment } from '../support/aws-pipeline.js';
import { createScheduledTriggerHandler } from '../../lib/aws/scheduled-trigger-handler.js';
import { createQuietObservability } from '../../lib/aws/observability.js';
import { COMPACTION_SAFETY_MARGIN_MS } from '../../lib/aws/scheduled-compaction.js';
import { readDeadLetters } from '../../lib/aws/s3-dead-letter-writer.js';
import { mirrorPrefix, parquetTable, queryWithDuckDb } from '../support/duckdb-reader.js';

const SOURCE_SCHEMA = 'seq long, store string, price double, ok boolean, ts timestamp, note string';

/** Every type the sink maps: long, double, boolean, string, timestamp, the window struct, an array, NULLs. */
const lakeRows = (df: DataFrame): DataFrame => df.select(
  col('seq'), col('store'), col('price'), col('ok'), col('ts'),
  window(col('ts'), '1 hour').as('window'),
  split(col('note'), ',').as('tags'),
  substring(col('ts').cast('string'), 1, 10).as('dt'),
);

function lakeQuery(name: string): StreamingQueryDefinition {
  return defineQuery({
    name,
    source: { schema: SOURCE_SCHEMA },
    transform: lakeRows,
    outputMode: 'append',
    sink: { kind: 's3-files', format: 'parquet', partitionBy: ['dt', 'store'] },
  });
}

interface Event { seq: number; store: string; price: number | null; ok: boolean; ts: string; note: string | null }
/** Store names a folder must escape (`/`, `=`, `..`, a space, non-ASCII) and two days. */
const stores = ['north', 'a/b', 'x=y', '..', 'sp ace', 'ünï'];
const events: Event[] = Array.from({ length: 48 }, (_, i) => ({
  seq: i,
  store: stores[i % stores.length]!,
  price: i % 5 === 0 ? null : i * 1.25,
  ok: i % 2 === 0,
  ts: new Date(Date.UTC(2026, 11, 1, 22, 0) + i * 5 * 60_000 + (i % 3)).toISOString(),
  note: i % 4 === 0 ? null : `t${i % 3},u`,
}));

interface LakeRow {
  seq: number; store: string; price: number | null; ok: boolean; ts: number;
  window: { start: number; end: number }; tags: string[] | null; dt: string;
}

/** The engine in memory on the same events: the rows DuckDB must return (timestamps in micros). */
async function inMemoryRows(): Promise<LakeRow[]> {
  const session = new SluiceSession();
  const { stream, df } = session.memoryStream(SOURCE_SCHEMA);
  const sink = new MemorySink();
  const q = await lakeRows(df).writeStream.outputMode('append').sink(sink).start();
  stream.addData(events.map((e) => [e.seq, e.store, e.price, e.ok, parseTimestamp(e.ts), e.note]));
  await q.processAllAvailable();
  await q.stop();
  return sink.allRows().map((r) => {
    const [seq, store, price, ok, ts, w, tags, dt] = r as [number, string, number | null, boolean, number, { start: number; end: number }, string[] | null, string];
    return { seq, store, price, ok, ts, window: { start: w.start, end: w.end }, tags, dt };
  });
}

const bySeq = (a: { seq: number }, b: { seq: number }): number => a.seq - b.seq;

const SELECT = (files: string): string => `SELECT seq, store, price, ok, epoch_us(ts) AS ts,
  {'start': epoch_us("window"."start"), 'end': epoch_us("window"."end")} AS "window", tags, dt FROM ${files}`;

const asRecords = (list: Event[]) => list.map((e) => ({ data: JSON.stringify(e), partitionKey: e.store }));

let emulators: EmulatorSet;
let expected: LakeRow[];
const dirs: string[] = [];

async function readWithDuckDb(d: { clients: { s3: import('@aws-sdk/client-s3').S3Client }; config: { sinkBucket?: string; sinkPrefix: string } }) {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-lake-'));
  dirs.push(dir);
  const keys = await mirrorPrefix(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix, dir);
  if (!keys.some((k) => k.endsWith('.parquet'))) return { keys, columns: [], rows: [] as LakeRow[] };
  const result = await queryWithDuckDb(SELECT, parquetTable(dir));
  return { keys, columns: result.columns, rows: (result.rows as unknown as LakeRow[]).sort(bySeq) };
}

/** The scheduled sweep as it runs once the grace period after the last reveal has passed. */
async function sweepAfterGrace(d: Deployment): Promise<void> {
  await sweepRevealedStaging({ client: d.clients.s3, bucket: d.config.sinkBucket!, prefix: d.config.sinkPrefix, graceMs: 60_000, now: () => Date.now() + 120_000 });
}

beforeAll(async () => {
  emulators = await startEmulators();
  expected = (await inMemoryRows()).sort(bySeq);
});
afterAll(async () => {
  await emulators?.stop();
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

describe('Parquet files sink read by DuckDB (emulators)', { timeout: 300_000 }, () => {
  it('DuckDB reads exactly the in-memory rows, with Spark\'s Parquet types, from Hive folders with escaped values', async () => {
    const d = await deploy(emulators, lakeQuery('lake-parquet'), 2);
    await d.put(asRecords(events));
    await d.drain();
    expect(d.results.every((r) => r.result.error === undefined)).toBe(true);

    const { keys, columns, rows } = await readWithDuckDb(d);
    expect(rows).toEqual(expected);
    expect(rows).toHaveLength(events.length);
    expect(columns).toEqual([
      { name: 'seq', type: 'BIGINT' },
      { name: 'store', type: 'VARCHAR' },
      { name: 'price', type: 'DOUBLE' },
      { name: 'ok', type: 'BOOLEAN' },
      { name: 'ts', type: 'BIGINT' },
      { name: 'window', type: 'STRUCT("start" BIGINT, "end" BIGINT)' },
      { name: 'tags', type: 'VARCHAR[]' },
      { name: 'dt', type: 'VARCHAR' },
    ]);
    // The file's own schema, as DuckDB reports it (partition columns come from the folders).
    const dir = dirs.at(-1)!;
    const schema = await queryWithDuckDb((f) => `SELECT * FROM ${f}`, parquetTable(dir));
    expect(schema.columns).toEqual([
      { name: 'seq', type: 'BIGINT' },
      { name: 'price', type: 'DOUBLE' },
      { name: 'ok', type: 'BOOLEAN' },
      { name: 'ts', type: 'TIMESTAMP WITH TIME ZONE' },
      { name: 'window', type: 'STRUCT("start" TIMESTAMP WITH TIME ZONE, "end" TIMESTAMP WITH TIME ZONE)' },
      { name: 'tags', type: 'VARCHAR[]' },
      { name: 'dt', type: 'VARCHAR' },
      { name: 'store', type: 'VARCHAR' },
    ]);
    const codecs = await queryWithDuckDb(() => `SELECT DISTINCT compression FROM parquet_metadata('${join(dir, '**', '*.parquet')}')`, '');
    expect(codecs.rows).toEqual([{ compression: 'SNAPPY' }]);
    // Hive folders: escaped values, two days.
    const visible = keys.filter((k) => k.endsWith('.parquet')).map((k) => k.slice(d.config.sinkPrefix.length));
    expect(new Set(visible.map((k) => k.split('/').slice(0, 2).join('/')))).toEqual(new Set([
      ...['2026-12-01', '2026-12-02'].flatMap((day) => ['north', 'a%2Fb', 'x%3Dy', '..', 'sp ace', 'ünï'].map((s) => `dt=${day}/store=${s}`)),
    ]));
    // Staged copies stay until the scheduled sweep; once every batch committed and the grace
    // period passed, it deletes all of them.
    expect(keys.some((k) => k.includes('_sluice_staging/'))).toBe(true);
    await sweepAfterGrace(d);
    expect(await listKeys(d.clients.s3, d.config.sinkBucket!, `${d.config.sinkPrefix}_sluice_staging/`)).toEqual([]);
    // The manifest reader agrees.
    expect((await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix)).length).toBe(events.length);
  });

  it('a crash between the data write and the commit shows none of that batch; the retry shows it once; a crash before the reveal is repaired at the next start', async () => {
    const d = await deploy(emulators, lakeQuery('lake-crash'), 1);
    await d.put(asRecords(events.slice(0, 8)));
    await d.drain();
    const before = await readWithDuckDb(d);
    expect(before.rows).toEqual(expected.slice(0, 8));

    // The next batch writes its files, then its checkpoint commit fails once.
    let written: SinkBatch | undefined;
    let seenAtCrash: Awaited<ReturnType<typeof readWithDuckDb>> | undefined;
    let commitFaults = 0;
    const decorateBackends = (backends: PartitionBackends): PartitionBackends => {
      const commitLog = backends.checkpoint.commitLog;
      const failingCommitLog = Object.create(commitLog) as typeof commitLog;
      const crashOnce = async (): Promise<void> => {
        if (commitFaults++ === 0) {
          seenAtCrash = await readWithDuckDb(d);
          throw new Error('injected: the process died before the checkpoint commit');
        }
      };
      failingCommitLog.add = async (batchId, entry) => { await crashOnce(); return commitLog.add(batchId, entry); };
      // The engine commits through addWithSideWrites when the log has it (the watermark row rides along).
      if (commitLog.addWithSideWrites) {
        failingCommitLog.addWithSideWrites = async (batchId, entry, writes) => { await crashOnce(); return commitLog.addWithSideWrites!(batchId, entry, writes); };
      }
      return { ...backends, checkpoint: { ...backends.checkpoint, commitLog: failingCommitLog, stateStore: backends.checkpoint.stateStore, readQueryMetadata: () => backends.checkpoint.readQueryMetadata(), writeQueryMetadata: (m) => backends.checkpoint.writeQueryMetadata(m) } };
    };
    const decorateSink = (sink: Sink): Sink => ({
      description: sink.description,
      supportedOutputModes: sink.supportedOutputModes,
      addBatch: async (b) => { if (b.rows.length > 0) written ??= b; await sink.addBatch(b); },
      onCommitted: (p, n) => sink.onCommitted!(p, n),
    });
    await d.put(asRecords(events.slice(8, 16)));
    await d.drain({}, { decorateBackends, decorateSink });
    expect(commitFaults).toBeGreaterThan(1);
    expect(written!.rows.length).toBeGreaterThan(0);
    // At the crash the batch's files existed, staged; DuckDB saw only the batches before it.
    expect(seenAtCrash!.rows).toEqual(expected.slice(0, 8));
    expect(seenAtCrash!.keys.some((k) => k.includes('_sluice_staging/') && k.endsWith('.parquet.staged'))).toBe(true);
    expect((await readWithDuckDb(d)).rows).toEqual(expected.slice(0, 16));

    // The commit succeeds but the run stops before revealing: the next start reveals the batch.
    let revealFaults = 0;
    const skipFirstReveal = (sink: Sink): Sink => ({
      description: sink.description,
      supportedOutputModes: sink.supportedOutputModes,
      addBatch: (b) => sink.addBatch(b),
      onCommitted: async (p, n) => {
        if (revealFaults++ === 0) throw new Error('injected: the process died after the commit, before the reveal');
        await sink.onCommitted!(p, n);
      },
    });
    await d.put(asRecords(events.slice(16, 24)));
    await d.drain({}, { decorateSink: skipFirstReveal });
    expect(revealFaults).toBeGreaterThan(1);
    const after = await readWithDuckDb(d);
    expect(after.rows).toEqual(expected.slice(0, 24));
    await sweepAfterGrace(d);
    expect(await listKeys(d.clients.s3, d.config.sinkBucket!, `${d.config.sinkPrefix}_sluice_staging/`)).toEqual([]);
  });

  it('compaction merges each quiet folder\'s small files: DuckDB and the manifest reader see the same rows before and after, and a crash mid-swap is finished by the next run', async () => {
    const d = await deploy(emulators, lakeQuery('lake-compact'), 1);
    for (let i = 0; i < 48; i += 12) {
      await d.put(asRecords(events.slice(i, i + 12)));
      await d.drain();
    }
    const before = await readWithDuckDb(d);
    expect(before.rows).toEqual(expected);
    const smallFiles = before.keys.filter((k) => k.endsWith('.parquet'));
    const { sinkBucket, sinkPrefix } = d.config;

    // Files newer than minAgeMs are left alone.
    expect(await compactFiles({ client: d.clients.s3, bucket: sinkBucket!, prefix: sinkPrefix, format: 'parquet' })).toMatchObject({ filesMerged: 0 });

    // The scheduled sweep has deleted the staged copies by the time files are old enough to compact.
    await sweepAfterGrace(d);
    // A crash between the compacted file's PUT and the deletes: the next run finishes the swap.
    const client = new S3Client({
      region: emulators.clientOptions.region, endpoint: emulators.endpoints.s3, forcePathStyle: true,
      credentials: emulators.clientOptions.credentials, maxAttempts: 1,
    });
    client.middlewareStack.add((next, context) => async (args) => {
      if (context.commandName === 'DeleteObjectsCommand') throw new Error('injected: the compaction died before deleting its inputs');
      return next(args);
    }, { step: 'initialize', name: 'failDeletes' });
    await expect(compactFiles({ client, bucket: sinkBucket!, prefix: sinkPrefix, format: 'parquet', minAgeMs: 0 })).rejects.toThrow(/injected/);
    client.destroy();
    // The manifest reader stays exact during the window; a listing reader sees the merged rows twice (S3 has no atomic swap).
    expect((await readS3Files(d.clients.s3, sinkBucket!, sinkPrefix)).length).toBe(events.length);
    const during = await readWithDuckDb(d);
    expect(during.rows.length).toBeGreaterThan(events.length);

    const report = await compactFiles({ client: d.clients.s3, bucket: sinkBucket!, prefix: sinkPrefix, format: 'parquet', minAgeMs: 0 });
    expect(report.recordsFinished).toBe(1);
    const after = await readWithDuckDb(d);
    expect(after.rows).toEqual(expected);
    const compactedFiles = after.keys.filter((k) => k.endsWith('.parquet'));
    expect(compactedFiles.length).toBeLessThan(smallFiles.length);
    expect(compactedFiles.every((k) => k.split('/').at(-1)!.startsWith('compacted-') || smallFiles.includes(k))).toBe(true);
    expect(after.columns).toEqual(before.columns);
    const fromManifest = await readS3Files(d.clients.s3, sinkBucket!, sinkPrefix);
    expect(fromManifest.map((r) => r.seq).sort((a, b) => Number(a) - Number(b))).toEqual(expected.map((r) => r.seq));

    // New batches after compaction land beside the compacted files; nothing is lost or doubled.
    await d.put(asRecords(events.slice(0, 6).map((e) => ({ ...e, seq: e.seq + 1000 }))));
    await d.drain();
    expect((await readWithDuckDb(d)).rows.length).toBe(events.length + 6);
  });

  it('the scheduled function compacts after its tick: the same rows from fewer objects, nothing before minAge, nothing past its time budget', async () => {
    const definition = lakeQuery('lake-tick-compact');
    const d = await deploy(emulators, definition, 1);
    for (let i = 0; i < 48; i += 12) {
      await d.put(asRecords(events.slice(i, i + 12)));
      await d.drain();
    }
    const before = await readWithDuckDb(d);
    expect(before.rows).toEqual(expected);
    const smallFiles = before.keys.filter((k) => k.endsWith('.parquet'));
    const scheduled = (overrides: Partial<typeof d.config>) => createScheduledTriggerHandler(definition, {
      config: { ...d.config, ...overrides }, clients: d.clients, observability: createQuietObservability(definition.name),
    });

    // The deployed defaults: an hour-old minimum, so this tick's fresh files stay as they are, staged copies too.
    const fresh = await scheduled({})({ mode: 'tick' });
    expect(fresh.compaction).toMatchObject({ filesMerged: 0, complete: true });
    expect(fresh.staging).toEqual({ batchesSwept: 0, filesDeleted: 0, batchesKept: 0 });
    // Turned off (the construct's `compaction: false`): no compaction step at all.
    expect((await scheduled({ compaction: false })({ mode: 'tick' })).compaction).toBeUndefined();
    // No time left before the function's timeout: the tick merges nothing and says so.
    const noTime = { getRemainingTimeInMillis: () => COMPACTION_SAFETY_MARGIN_MS };
    expect((await scheduled({ compactionMinAgeMs: 0 })({ mode: 'tick' }, noTime)).compaction).toMatchObject({ filesMerged: 0, complete: false });
    expect((await readWithDuckDb(d)).keys.filter((k) => k.endsWith('.parquet'))).toEqual(smallFiles);

    const summary = await scheduled({ compactionMinAgeMs: 0 })({ mode: 'tick' }, { getRemainingTimeInMillis: () => 60_000 });
    expect(summary.shards.every((s) => s.error === undefined)).toBe(true);
    expect(summary.compaction).toMatchObject({ complete: true });
    // The staged copies of the revealed batches went first.
    expect(summary.staging).toMatchObject({ batchesKept: 0 });
    expect((summary.staging as { filesDeleted: number }).filesDeleted).toBeGreaterThan(0);
    expect(await listKeys(d.clients.s3, d.config.sinkBucket!, `${d.config.sinkPrefix}_sluice_staging/`)).toEqual([]);
    const after = await readWithDuckDb(d);
    expect(after.rows).toEqual(expected);
    const dataFiles = after.keys.filter((k) => k.endsWith('.parquet'));
    expect(dataFiles.length).toBeLessThan(smallFiles.length);
    expect((summary.compaction as { filesMerged: number }).filesMerged).toBe(smallFiles.length - (dataFiles.length - (summary.compaction as { filesWritten: number }).filesWritten));
    expect(dataFiles.some((k) => k.split('/').at(-1)!.startsWith('compacted-'))).toBe(true);
    const fromManifest = await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix);
    expect(fromManifest.map((r) => r.seq).sort((a, b) => Number(a) - Number(b))).toEqual(expected.map((r) => r.seq));
  });

  it('a row the sink cannot write (its folder key over S3\'s 1,024 bytes) dead-letters its input record with the code; the other rows are written', async () => {
    const d = await deploy(emulators, lakeQuery('lake-unwritable'), 1);
    const tooLong = { ...events[1]!, store: 'z'.repeat(1100) };
    await d.put([events[0]!, tooLong, events[2]!].map((e) => ({ data: JSON.stringify(e), partitionKey: 'k' })));
    await d.drain();
    const letters = await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix);
    expect(letters).toHaveLength(1);
    expect(JSON.parse(Buffer.from(letters[0]!.dataBase64, 'base64').toString('utf-8'))).toEqual(tooLong);
    expect(letters[0]!.reason).toMatch(/SINK_KEY_TOO_LONG/);
    expect(letters[0]!.reason).not.toContain('zzz');
    expect((await readWithDuckDb(d)).rows).toEqual([expected[0], expected[2]]);
    expect(await listKeys(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix)).not.toContainEqual(expect.stringContaining('_sluice_rejected'));
  });
});
