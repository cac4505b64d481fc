/**
 * The spill collector: deletes the S3 objects of `onUnwritableRow: 'spill'` that no item points to,
 * in two runs with a tombstone between (why that is safe against writers, retries, shared objects
 * and replays: lib/aws/dynamodb-spill.ts). One run:
 *   1. lists the tombstones and the objects (every spill prefix of the query's namespaces);
 *   2. reads the tables to scan (`tables()`, called after the listing: a replay's table is named in
 *      the pointer item before its first batch), then scans them all, strongly consistent, for the
 *      `_spilled` pointers: a parallel scan (`scanSegments` segments, `scanConcurrency` of them at
 *      once, each paged in turn); a scan that cannot finish before `shouldStop` or the deadline
 *      (`remainingMs`) ends the run with nothing marked or deleted, and reports where each segment
 *      got to (`progress`) so that the next run resumes there (`resume`);
 *   3. a tombstone older than the grace (by the scan's start): its object is deleted and then the
 *      tombstone, or, when an item points to the object, only the tombstone;
 *   4. an object older than the grace, without tombstone, that no item points to: a tombstone.
 * A dry run does 1 and 2 and reports what 3 and 4 would do.
 *
 * A resumed run lists again but judges by the first run's times (its listing and its scan's start):
 * a tombstone due by then existed before the scan began, so no writer has pointed to its object
 * since (writers look tombstones up), and whatever pointed to it before is in the items the scan
 * reads, in this part or the earlier one. What the earlier part saw is carried as the candidates
 * (objects old enough, objects of due tombstones) that no item pointed to yet; a candidate not
 * among them was seen referenced. Candidates can only have become fewer since (each existed at
 * the first listing), so nothing is judged on less than a whole scan.
 *
 * Cost of one run: the scan reads every item of every table in full (a projection does not lower
 * the units): strongly consistent, 1 read unit per 4 KB, 262,144 read units per GB of table, in
 * pages of up to 1 MB (about 1,024 Scan requests per GB); plus one S3 LIST per 1,000 objects and
 * tombstones, one PUT per new tombstone (DELETE is free). Writers add one HEAD per spilled object.
 */
import { ScanCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { S3Client } from '@aws-sdk/client-s3';
import type { CostMeter } from '../core/cost-meter.js';
import { meterUnits } from './dynamodb-cost.js';
import {
  SPILL_ATTRIBUTE, SPILL_CHECK_VALID_MS, SPILL_DIR, SPILL_TOMBSTONE_DIR, spilledKeyOfPointer, spilledKeyOfTombstone, spillTombstoneKey,
} from './dynamodb-spill.js';
import { deleteKeys, listObjects, mapWithConcurrency, normalizePrefix, putObject, type ListedObject } from './s3-util.js';

/** The grace the collector waits by default: an orphan goes about a day after its last write. */
export const DEFAULT_SPILL_GC_GRACE_MS = 12 * 3600_000;
/** The shortest grace allowed: a writer's look-up validity and a margin for clocks' skew. */
export const MIN_SPILL_GC_GRACE_MS = SPILL_CHECK_VALID_MS + 5 * 60_000;
const PUTS_IN_FLIGHT = 8;
/** Segments of the parallel scan, and how many are read at once (DynamoDB allows up to 1,000,000 segments). */
export const DEFAULT_SCAN_SEGMENTS = 16;
export const DEFAULT_SCAN_CONCURRENCY = 4;
/** Kept free before the deadline for the requests after the scan stops: saving its progress, releasing the lease. */
const DEADLINE_RESERVE_MS = 5_000;
const DELETES_PER_REQUEST = 1000;

export interface SpillGcOptions {
  readonly s3: S3Client;
  readonly bucket: string;
  /** The sink prefixes whose `_sluice_spill/` folders are collected. */
  readonly prefixes: readonly string[];
  readonly dynamodb: DynamoDBClient;
  /** Every table whose items may point into those folders (live, replay shadow, retired). */
  readonly tables: () => Promise<readonly string[]>;
  /** At least MIN_SPILL_GC_GRACE_MS. */
  readonly graceMs?: number;
  readonly dryRun?: boolean;
  readonly now?: () => number;
  readonly meter?: CostMeter;
  /** Asked between scan pages and before each write: true ends the run (nothing half-judged is deleted). */
  readonly shouldStop?: () => boolean;
  /**
   * The time left before the invocation's deadline (Lambda's `getRemainingTimeInMillis`): the run
   * stops when less than a reserve plus its slowest scan page so far is left.
   */
  readonly remainingMs?: () => number;
  /** Where an earlier run's scan stopped (its report's `progress`): this run continues it. */
  readonly resume?: SpillScanProgress;
  readonly scanSegments?: number;
  readonly scanConcurrency?: number;
  /** Called after the scan, before any tombstone or delete (tests gate a writer here). */
  readonly afterScan?: () => Promise<void>;
}

export interface SpillGcReport {
  readonly dryRun: boolean;
  /** Spilled objects listed, and how many of them an item points to. */
  readonly objects: number;
  readonly referenced: number;
  /** Objects newly tombstoned (a dry run: would be). */
  readonly marked: readonly string[];
  /** Objects deleted with their tombstones (a dry run: would be). */
  readonly deleted: readonly string[];
  /** Tombstones dropped because an item points to their object again. */
  readonly unmarked: readonly string[];
  /** Tombstones younger than the grace, left for a later run. */
  readonly pending: number;
  readonly scan: { readonly tables: readonly string[]; readonly requests: number; readonly items: number; readonly readUnits: number };
  /** Set when `shouldStop` ended the run; nothing after that point was done. */
  readonly stoppedBy?: 'deadline';
  /** Set when the run stopped within its scan: what a later run needs to continue it. */
  readonly progress?: SpillScanProgress;
  /** Set when this run continued an earlier one's scan. */
  readonly resumed?: boolean;
}

/** Where a segment of a table's parallel scan is: done, or the key to continue after (none: from its start). */
export interface SegmentPosition {
  readonly done: boolean;
  readonly from?: Record<string, AttributeValue>;
}

/** A scan stopped before its end (plain JSON: it is kept in the lease item between runs). */
export interface SpillScanProgress {
  /** The first run's listing and scan start (ms): every judgement uses these. */
  readonly listedAt: number;
  readonly scanStart: number;
  readonly segments: number;
  /** By table: each segment's position. A table not here is scanned from its start. */
  readonly positions: Readonly<Record<string, readonly SegmentPosition[]>>;
  /** The candidates (spilled object keys) that no item scanned so far pointed to. */
  readonly unreferenced: readonly string[];
}

export async function collectSpillGarbage(options: SpillGcOptions): Promise<SpillGcReport> {
  const { s3, bucket, meter } = options;
  const now = options.now ?? Date.now;
  const graceMs = options.graceMs ?? DEFAULT_SPILL_GC_GRACE_MS;
  if (graceMs < MIN_SPILL_GC_GRACE_MS) {
    throw new Error(`the spill collector's grace (${graceMs} ms) must be at least ${MIN_SPILL_GC_GRACE_MS} ms: a writer's tombstone look-up holds ${SPILL_CHECK_VALID_MS} ms`);
  }
  const dryRun = options.dryRun === true;
  const resume = options.resume;
  const listedAt = resume?.listedAt ?? now();
  const prefixes = [...new Set(options.prefixes.map(normalizePrefix))];
  const tombstones: ListedObject[] = [];
  const objects: ListedObject[] = [];
  for (const prefix of prefixes) {
    tombstones.push(...await listObjects(s3, bucket, `${prefix}${SPILL_TOMBSTONE_DIR}`, meter));
    objects.push(...await listObjects(s3, bucket, `${prefix}${SPILL_DIR}`, meter));
  }
  const tables = [...new Set(await options.tables())];
  const scanStart = resume?.scanStart ?? now();
  const segments = resume?.segments ?? options.scanSegments ?? DEFAULT_SCAN_SEGMENTS;
  const references = new Set<string>();
  const scan = { tables, requests: 0, items: 0, readUnits: 0 };
  const due = tombstones.filter((t) => t.lastModified.getTime() <= scanStart - graceMs);
  const tombstoned = new Set(tombstones.map((t) => spilledKeyOfTombstone(t.key)));
  const candidates = new Set([
    ...due.map((t) => spilledKeyOfTombstone(t.key)),
    ...objects.filter((o) => o.lastModified.getTime() <= listedAt - graceMs && !tombstoned.has(o.key)).map((o) => o.key),
  ]);
  // A candidate the earlier part of a resumed scan saw referenced counts as referenced.
  const unseen = resume ? new Set(resume.unreferenced) : null;
  const isReferenced = (key: string): boolean => references.has(key) || (unseen !== null && candidates.has(key) && !unseen.has(key));
  const positions: Record<string, SegmentPosition[]> = Object.fromEntries(tables.map((table) => [table,
    [...(resume?.positions[table] ?? Array.from({ length: segments }, () => ({ done: false })))]]));
  const empty = { dryRun, objects: objects.length, referenced: 0, marked: [], deleted: [], unmarked: [], pending: 0, scan, ...(resume ? { resumed: true } : {}) };
  let slowestPageMs = 0;
  const stop = (): boolean => !!options.shouldStop?.() || (options.remainingMs !== undefined && options.remainingMs() < DEADLINE_RESERVE_MS + slowestPageMs);
  const scanner = { ...options, concurrency: options.scanConcurrency ?? DEFAULT_SCAN_CONCURRENCY, stop, notePage: (ms: number) => { slowestPageMs = Math.max(slowestPageMs, ms); } };
  for (const table of tables) {
    const done = await scanPointers(scanner, table, positions[table]!, references, scan);
    if (!done) {
      const progress: SpillScanProgress = {
        listedAt, scanStart, segments, positions, unreferenced: [...candidates].filter((key) => !isReferenced(key)),
      };
      return { ...empty, stoppedBy: 'deadline', progress };
    }
  }
  await options.afterScan?.();

  const objectKeys = new Set(objects.map((o) => o.key));
  const deleted = due.map((t) => spilledKeyOfTombstone(t.key)).filter((key) => !isReferenced(key));
  const unmarked = due.map((t) => spilledKeyOfTombstone(t.key)).filter((key) => isReferenced(key));
  const marked = objects
    .filter((o) => o.lastModified.getTime() <= listedAt - graceMs && !tombstoned.has(o.key) && !isReferenced(o.key))
    .map((o) => o.key);
  const report = {
    ...empty, referenced: objects.filter((o) => isReferenced(o.key)).length,
    deleted: deleted.filter((key) => objectKeys.has(key)), unmarked, marked, pending: tombstones.length - due.length,
  };
  if (dryRun) return report;

  const done: string[] = [];
  for (let i = 0; i < deleted.length; i += DELETES_PER_REQUEST) {
    if (stop()) return { ...report, deleted: done.filter((key) => objectKeys.has(key)), unmarked: [], marked: [], stoppedBy: 'deadline' };
    const chunk = deleted.slice(i, i + DELETES_PER_REQUEST);
    // The object before its tombstone: while the tombstone exists no writer points to the key.
    await deleteKeys(s3, bucket, chunk);
    await deleteKeys(s3, bucket, chunk.map(spillTombstoneKey));
    done.push(...chunk);
  }
  await deleteKeys(s3, bucket, unmarked.map(spillTombstoneKey));
  let tombstonesWritten = 0;
  let stopped = false;
  await mapWithConcurrency(marked, PUTS_IN_FLIGHT, async (key) => {
    if (stopped || stop()) { stopped = true; return; }
    await putObject(s3, bucket, spillTombstoneKey(key), JSON.stringify({ object: key, markedAt: new Date(now()).toISOString() }), 'application/json', meter);
    tombstonesWritten++;
  });
  return { ...report, marked: stopped ? marked.slice(0, tombstonesWritten) : marked, ...(stopped ? { stoppedBy: 'deadline' as const } : {}) };
}

/**
 * Adds the table's spill pointers into `bucket` to `references`, continuing each segment from its
 * position (updated in place); false when stopped before every segment is done.
 */
async function scanPointers(
  options: SpillGcOptions & { concurrency: number; stop: () => boolean; notePage: (ms: number) => void },
  table: string, positions: SegmentPosition[], references: Set<string>, scan: { requests: number; items: number; readUnits: number },
): Promise<boolean> {
  let stopped = false;
  await mapWithConcurrency(positions.map((_, segment) => segment), options.concurrency, async (segment) => {
    while (!positions[segment]!.done) {
      if (stopped || options.stop()) { stopped = true; return; }
      const from = positions[segment]!.from;
      const started = Date.now();
      const page = await options.dynamodb.send(new ScanCommand({
        TableName: table, ConsistentRead: true, ReturnConsumedCapacity: 'TOTAL', Segment: segment, TotalSegments: positions.length,
        ProjectionExpression: '#s', FilterExpression: 'attribute_exists(#s)', ExpressionAttributeNames: { '#s': SPILL_ATTRIBUTE },
        ...(from ? { ExclusiveStartKey: from } : {}),
      }));
      options.notePage(Date.now() - started);
      scan.requests++;
      scan.items += page.ScannedCount ?? 0;
      const units = page.ConsumedCapacity?.CapacityUnits ?? 0;
      scan.readUnits += units;
      meterUnits(options.meter, 'read', page.ConsumedCapacity, () => units);
      for (const item of page.Items ?? []) {
        for (const pointer of Object.values(item[SPILL_ATTRIBUTE]?.M ?? {})) {
          const key = spilledKeyOfPointer(pointer.S ?? '', options.bucket);
          if (key !== null) references.add(key);
        }
      }
      positions[segment] = page.LastEvaluatedKey ? { done: false, from: page.LastEvaluatedKey } : { done: true };
    }
  });
  return !stopped;
}
