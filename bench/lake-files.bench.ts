/**
 * What the files sink writes per 1M events, JSON Lines against Parquet, before and after compaction:
 * S3 PUTs (a COPY is priced as a PUT), bytes uploaded, and the objects and bytes left in the table.
 * The sink runs against s3rver (real SDK calls) on one shard with batches of `LAKE_BATCH` rows
 * (default 1,000) of an append query's output (a string key, a long, a double, a timestamp and the
 * window struct), partitioned by day; figures are scaled from `LAKE_EVENTS` (default 50,000) to 1M.
 *
 *   npm run bench        (or: node --conditions=sluice-source --import tsx bench/lake-files.bench.ts)
 */
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { createAwsClients } from '../lib/aws/clients.js';
import { S3FilesSink } from '../lib/aws/s3-files-sink.js';
import { compactFiles } from '../lib/aws/s3-compaction.js';
import { listObjects } from '../lib/aws/s3-util.js';
import { CostMeter } from '../lib/core/cost-meter.js';
import { startEmulators } from '../lib/local/emulators.js';
import { WINDOW_STRUCT, type StructField } from '../lib/plan/data-types.js';
import type { FileFormat } from '../lib/sinks/file-format.js';

const SCHEMA: StructField[] = [
  { name: 'window', type: WINDOW_STRUCT },
  { name: 'store_id', type: 'string' },
  { name: 'orders', type: 'long' },
  { name: 'revenue', type: 'double' },
  { name: 'last_order', type: 'timestamp' },
  { name: 'dt', type: 'string' },
];

function rowsOf(batch: number, size: number): unknown[][] {
  const rows: unknown[][] = [];
  const base = Date.UTC(2026, 11, 1) * 1000;
  for (let i = 0; i < size; i++) {
    const n = batch * size + i;
    const ts = base + n * 6_000_000; // six seconds apart: a day folder every 14,400 events
    const start = ts - (ts % 3_600_000_000);
    rows.push([{ start, end: start + 3_600_000_000 }, `store-${n % 50}`, n % 97, (n % 1000) / 7, ts, new Date(ts / 1000).toISOString().slice(0, 10)]);
  }
  return rows;
}

export interface LakeFilesResult {
  readonly format: FileFormat;
  readonly compacted: boolean;
  readonly putsPer1M: number;
  readonly bytesUploadedPer1M: number;
  readonly objectsPer1M: number;
  readonly bytesStoredPer1M: number;
}

export async function measureLakeFiles(
  events = Number(process.env.LAKE_EVENTS ?? 50_000), batchSize = Number(process.env.LAKE_BATCH ?? 1_000),
): Promise<LakeFilesResult[]> {
  const emulators = await startEmulators({ kinesis: false, dynamodb: false });
  const clients = createAwsClients(emulators.clientOptions);
  const scale = 1_000_000 / events;
  const results: LakeFilesResult[] = [];
  try {
    for (const format of ['jsonl', 'parquet'] as const) {
      const bucket = `lake-bench-${format}-${process.pid}`;
      await clients.s3.send(new CreateBucketCommand({ Bucket: bucket }));
      const meter = new CostMeter();
      let uploaded = 0;
      const sink = new S3FilesSink({ client: clients.s3, bucket, prefix: 'table/', format, partitionBy: ['dt'], meter });
      for (let b = 0; b * batchSize < events; b++) {
        const rows = rowsOf(b, Math.min(batchSize, events - b * batchSize));
        await sink.addBatch({ batchId: b, partitionId: 'shardId-000000000000', rows, schema: SCHEMA, columns: SCHEMA.map((f) => f.name), outputMode: 'append' });
        await sink.onCommitted('shardId-000000000000', b);
      }
      const tableFiles = async () => (await listObjects(clients.s3, bucket, 'table/')).filter((o) => /\.(parquet|jsonl)$/.test(o.key) && !o.key.includes('/_'));
      const before = await tableFiles();
      for (const o of before) uploaded += o.bytes; // staged uploads; the reveal is a server-side copy
      const manifestPuts = meter.snapshot().s3Puts ?? 0;
      results.push({
        format, compacted: false, putsPer1M: Math.round(manifestPuts * scale), bytesUploadedPer1M: Math.round(uploaded * scale),
        objectsPer1M: Math.round(before.length * scale), bytesStoredPer1M: Math.round(before.reduce((n, o) => n + o.bytes, 0) * scale),
      });
      const report = await compactFiles({ client: clients.s3, bucket, prefix: 'table/', format, minAgeMs: 0, meter });
      const after = await tableFiles();
      results.push({
        format, compacted: true, putsPer1M: Math.round((meter.snapshot().s3Puts ?? 0) * scale),
        bytesUploadedPer1M: Math.round((uploaded + report.bytesWritten) * scale),
        objectsPer1M: Math.round(after.length * scale), bytesStoredPer1M: Math.round(after.reduce((n, o) => n + o.bytes, 0) * scale),
      });
    }
  } finally {
    clients.destroy();
    await emulators.stop();
  }
  return results;
}

export function printLakeFiles(results: readonly LakeFilesResult[]): void {
  console.log('Files sink per 1M events (1 shard, 1,000-row batches, partitioned by day; compaction merges each day folder):');
  console.log('format   compacted   PUTs     MB uploaded   table objects   MB stored');
  for (const r of results) {
    console.log(`${r.format.padEnd(8)} ${String(r.compacted).padEnd(11)} ${String(r.putsPer1M).padStart(6)} ${(r.bytesUploadedPer1M / 1e6).toFixed(1).padStart(13)} ${String(r.objectsPer1M).padStart(15)} ${(r.bytesStoredPer1M / 1e6).toFixed(1).padStart(11)}`);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const results = await measureLakeFiles();
  if (process.argv.includes('--json')) console.log(JSON.stringify(results));
  else printLakeFiles(results);
}
