/**
 * Two reveals of one committed S3-files batch at once (the committer's, and the at-start repair of
 * a trigger racing it on the same shard), and the sweep that deletes staged copies later, against
 * s3rver. s3rver's CopyObject onto an existing key unlinks the destination before it copies, so a
 * copy whose source is deleted meanwhile loses the destination for good (real S3 copies
 * atomically). That was the Kinesis-trigger race test's flake; here the interleaving is forced.
 */
import { DeleteObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { beforeAll, describe, expect, it } from 'vitest';
import { S3FilesSink, s3FilesDataKey, s3FilesStagingFolder } from '../../lib/aws/s3-files-sink.js';
import { sweepRevealedStaging } from '../../lib/aws/s3-staged-sweep.js';
import { readS3Files } from '../../lib/aws/sink-readers.js';
import { listKeys, objectExists } from '../../lib/aws/s3-util.js';
import type { EmulatorSet } from '../../lib/local/emulators.js';
import { useS3Emulator } from '../support/s3-emulator.js';
import type { StructField } from '../../lib/plan/data-types.js';
import type { SinkBatch } from '../../lib/sinks/sink.js';

const s3Emulator = useS3Emulator('reveal');
let emulators: EmulatorSet;
let s3: S3Client;
const newBucket = (): Promise<string> => s3Emulator.newBucket();

beforeAll(() => {
  emulators = s3Emulator.emulators;
  s3 = s3Emulator.s3;
});

const schema: StructField[] = [{ name: 'store', type: 'string' }, { name: 'amount', type: 'long' }];

function batch(partitionId: string, batchId: number, rows: unknown[][]): SinkBatch {
  return { partitionId, batchId, rows, schema, columns: schema.map((f) => f.name), outputMode: 'append' };
}

/**
 * A client whose CopyObject waits at a gate, then copies as s3rver does under a race: the existing
 * destination is removed first, so if the source is gone by then the destination stays gone.
 */
function gatedNonAtomicCopyClient(): { client: S3Client; reachedCopy: Promise<void>; release: () => void } {
  const client = new S3Client({
    region: emulators.clientOptions.region, endpoint: emulators.endpoints.s3, forcePathStyle: true,
    credentials: emulators.clientOptions.credentials, maxAttempts: 1,
  });
  let reached!: () => void;
  const reachedCopy = new Promise<void>((resolve) => { reached = resolve; });
  let release!: () => void;
  const gate = new Promise<void>((resolve) => { release = resolve; });
  client.middlewareStack.add((next, context) => async (args) => {
    if (context.commandName !== 'CopyObjectCommand') return next(args);
    reached();
    await gate;
    const { Bucket, Key } = args.input as { Bucket: string; Key: string };
    await s3.send(new DeleteObjectCommand({ Bucket, Key }));
    return next(args);
  }, { step: 'initialize', name: 'gatedNonAtomicCopy' });
  return { client, reachedCopy, release };
}

/** A client whose manifest-entry PUTs fail: the process died between the data and manifest writes. */
function clientFailingManifestPuts(): S3Client {
  const client = new S3Client({
    region: emulators.clientOptions.region, endpoint: emulators.endpoints.s3, forcePathStyle: true,
    credentials: emulators.clientOptions.credentials, maxAttempts: 1,
  });
  client.middlewareStack.add((next, context) => async (args) => {
    const key = (args.input as { Key?: string }).Key ?? '';
    if (context.commandName === 'PutObjectCommand' && key.includes('_sluice_metadata/')) throw new Error('injected: died before the manifest entry');
    return next(args);
  }, { step: 'initialize', name: 'failManifestPuts' });
  return client;
}

describe('S3FilesSink reveals racing on one batch', () => {
  it('a repair copying while the committer reveals keeps the visible file, even where an overwriting copy is not atomic', async () => {
    const bucket = await newBucket();
    const committer = new S3FilesSink({ client: s3, bucket, prefix: 'r/' });
    await committer.addBatch(batch('shard-0', 4, [['north', 1], ['south', 2]]));
    // A trigger starting on the same shard right after the commit: its at-start repair (a new
    // container, so it reads the manifest entry) reaches its copy first and is held there.
    const racing = gatedNonAtomicCopyClient();
    try {
      const repair = new S3FilesSink({ client: racing.client, bucket, prefix: 'r/' }).onCommitted('shard-0', 4);
      const repaired = repair.then(() => 'revealed', (error: Error) => error.message);
      await racing.reachedCopy;
      // Meanwhile the committer reveals the batch.
      await committer.onCommitted('shard-0', 4);
      racing.release();
      expect(await repaired).toBe('revealed');
      const visible = s3FilesDataKey('r/', '', 'shard-0', 4);
      expect(await objectExists(s3, bucket, visible)).toBe(true);
      expect(await readS3Files(s3, bucket, 'r/')).toEqual([{ store: 'north', amount: 1 }, { store: 'south', amount: 2 }]);
    } finally {
      racing.client.destroy();
    }
  });

  it('the sweep deletes the staged copies of batches revealed longer ago than the grace period, and nothing a reader or a reveal still needs', async () => {
    const bucket = await newBucket();
    const sink = new S3FilesSink({ client: s3, bucket, prefix: 's/' });
    // Batch 0 revealed; batch 1 written but not revealed (pending, or committed and its reveal died);
    // batch 2 staged by an attempt that died before its manifest entry.
    await sink.addBatch(batch('p', 0, [['a', 1]]));
    await sink.onCommitted('p', 0);
    await sink.addBatch(batch('p', 1, [['b', 2]]));
    const dying = clientFailingManifestPuts();
    try {
      await expect(new S3FilesSink({ client: dying, bucket, prefix: 's/' }).addBatch(batch('p', 2, [['c', 3]]))).rejects.toThrow(/injected/);
    } finally {
      dying.destroy();
    }
    const staged = async (b: number) => listKeys(s3, bucket, s3FilesStagingFolder('s/', 'p', b));
    expect((await staged(2)).length).toBe(1);

    // Within the grace period nothing goes, not even the revealed batch's staged copy.
    expect(await sweepRevealedStaging({ client: s3, bucket, prefix: 's/', graceMs: 60_000 }))
      .toEqual({ batchesSwept: 0, filesDeleted: 0, batchesKept: 0 });
    expect((await staged(0)).length).toBe(1);

    const later = () => Date.now() + 120_000;
    expect(await sweepRevealedStaging({ client: s3, bucket, prefix: 's/', graceMs: 60_000, now: later }))
      .toEqual({ batchesSwept: 1, filesDeleted: 1, batchesKept: 2 });
    expect(await staged(0)).toEqual([]);
    expect((await staged(1)).length).toBe(1);
    expect((await staged(2)).length).toBe(1);
    // The reader still finds batch 1 staged; its reveal (a later start) still works, and a repair of
    // the swept batch 0 finds nothing staged and leaves its visible file alone.
    expect((await readS3Files(s3, bucket, 's/')).map((r) => r.store)).toEqual(['a', 'b']);
    const restarted = new S3FilesSink({ client: s3, bucket, prefix: 's/' });
    await restarted.onCommitted('p', 0);
    await restarted.onCommitted('p', 1);
    expect(await objectExists(s3, bucket, s3FilesDataKey('s/', '', 'p', 0))).toBe(true);
    expect(await objectExists(s3, bucket, s3FilesDataKey('s/', '', 'p', 1))).toBe(true);
    expect((await readS3Files(s3, bucket, 's/')).map((r) => r.store)).toEqual(['a', 'b']);
  });
});

