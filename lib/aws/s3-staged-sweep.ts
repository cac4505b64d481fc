/**
 * Deletes the staged copies of revealed S3-files batches (lib/aws/s3-files-sink.ts), which no
 * reveal deletes itself: two reveals of one batch may run at once, and one's delete must never
 * pull the source from under the other's copy.
 *
 * A batch's staging folder is deleted when its manifest entry names visible files that all exist
 * and were last written more than `graceMs` ago. A reveal copies only while its invocation lives,
 * and only when the visible file is missing or it wrote the batch itself, so once the visible file
 * is older than any invocation can live (the functions' timeout, which `graceMs` must exceed), no
 * copy from the staged file can still be running. Everything else stays:
 *   - a folder with a file written within `graceMs` (a batch being written or re-run);
 *   - a folder without a manifest entry (an attempt died before writing it; the batch's re-run
 *     rewrites the same keys);
 *   - a batch whose visible file is missing (not revealed yet, or merged by compaction, which
 *     deletes such leftovers itself before it writes its output).
 */
import type { S3Client } from '@aws-sdk/client-s3';
import type { CostMeter } from '../core/cost-meter.js';
import { S3_FILES_METADATA_DIR, S3_FILES_STAGING_DIR, type S3FilesManifestEntry } from './s3-files-sink.js';
import { deleteKeys, getObjectText, listObjects, mapWithConcurrency, normalizePrefix, objectLastModified, type ListedObject } from './s3-util.js';

export interface StagedSweepOptions {
  readonly client: S3Client;
  readonly bucket: string;
  /** The sink's prefix (its table location). */
  readonly prefix: string;
  /** How old a revealed batch's visible files must be before its staged copies go (must exceed the functions' timeout). */
  readonly graceMs: number;
  readonly now?: () => number;
  readonly meter?: CostMeter;
  /** Asked before each batch folder: true stops the sweep there (the next run goes on). */
  readonly shouldStop?: () => boolean;
}

export interface StagedSweepReport {
  /** Batches whose staged copies were deleted. */
  readonly batchesSwept: number;
  readonly filesDeleted: number;
  /** Batches old enough to look at whose staged copies stay (no manifest entry, or not revealed). */
  readonly batchesKept: number;
}

const HEADS_IN_FLIGHT = 8;

export async function sweepRevealedStaging(options: StagedSweepOptions): Promise<StagedSweepReport> {
  const { client, bucket, meter } = options;
  const prefix = normalizePrefix(options.prefix);
  const cutoff = (options.now ?? Date.now)() - options.graceMs;
  const stagingRoot = `${prefix}${S3_FILES_STAGING_DIR}`;
  const folders = new Map<string, ListedObject[]>();
  for (const object of await listObjects(client, bucket, stagingRoot, meter)) {
    const folder = /^(partition=[^/]+\/\d+\/)/.exec(object.key.slice(stagingRoot.length))?.[1];
    if (folder === undefined) continue;
    let list = folders.get(folder);
    if (!list) folders.set(folder, list = []);
    list.push(object);
  }
  let batchesSwept = 0;
  let filesDeleted = 0;
  let batchesKept = 0;
  for (const [folder, objects] of folders) {
    if (options.shouldStop?.()) break;
    // Staged within the grace period: the batch may still be running or being revealed.
    if (objects.some((o) => o.lastModified.getTime() > cutoff)) continue;
    const text = await getObjectText(client, bucket, `${prefix}${S3_FILES_METADATA_DIR}${folder.slice(0, -1)}.json`, meter);
    if (text === undefined) { batchesKept++; continue; }
    const entry = JSON.parse(text) as S3FilesManifestEntry;
    const written = await mapWithConcurrency(entry.files, HEADS_IN_FLIGHT, (f) => objectLastModified(client, bucket, f.key, meter));
    if (written.some((at) => at === undefined || at.getTime() > cutoff)) { batchesKept++; continue; }
    await deleteKeys(client, bucket, objects.map((o) => o.key));
    batchesSwept++;
    filesDeleted += objects.length;
  }
  return { batchesSwept, filesDeleted, batchesKept };
}
