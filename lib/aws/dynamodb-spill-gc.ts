/**
 * The spill collector: deletes the S3 objects of `onUnwritableRow: 'spill'` that no item points to,
 * in two runs with a tombstone between (why that is safe against writers, retries, shared objects
 * and replays: lib/aws/dynamodb-spill.ts). One run:
 *   1. lists the tombstones and the objects (every spill prefix of the query's namespaces);
 *   2. reads the tables to scan (`tables()`, called after the listing: a replay's table is named in
 *      the pointer item before its first batch), then scans them all, strongly consistent, for the
 *      `_spilled` pointers; a scan that cannot finish before `shouldStop` ends the run with nothing
 *      marked or deleted;
 *   3. a tombstone older than the grace (by the scan's start): its object is deleted and then the
 *      tombstone, or, when an item points to the object, only the tombstone;
 *   4. an object older than the grace, without tombstone, that no item points to: a tombstone.
 * A dry run does 1 and 2 and reports what 3 and 4 would do.
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
}

export async function collectSpillGarbage(options: SpillGcOptions): Promise<SpillGcReport> {
  const { s3, bucket, meter } = options;
  const now = options.now ?? Date.now;
  const graceMs = options.graceMs ?? DEFAULT_SPILL_GC_GRACE_MS;
  if (graceMs < MIN_SPILL_GC_GRACE_MS) {
    throw new Error(`the spill collector's grace (${graceMs} ms) must be at least ${MIN_SPILL_GC_GRACE_MS} ms: a writer's tombstone look-up holds ${SPILL_CHECK_VALID_MS} ms`);
  }
  const dryRun = options.dryRun === true;
  const listedAt = now();
  const prefixes = [...new Set(options.prefixes.map(normalizePrefix))];
  const tombstones: ListedObject[] = [];
  const objects: ListedObject[] = [];
  for (const prefix of prefixes) {
    tombstones.push(...await listObjects(s3, bucket, `${prefix}${SPILL_TOMBSTONE_DIR}`, meter));
    objects.push(...await listObjects(s3, bucket, `${prefix}${SPILL_DIR}`, meter));
  }
  const tables = [...new Set(await options.tables())];
  const scanStart = now();
  const references = new Set<string>();
  const scan = { tables, requests: 0, items: 0, readUnits: 0 };
  const empty = { dryRun, objects: objects.length, referenced: 0, marked: [], deleted: [], unmarked: [], pending: 0, scan };
  for (const table of tables) {
    const done = await scanPointers(options, table, references, scan);
    if (!done) return { ...empty, stoppedBy: 'deadline' };
  }
  await options.afterScan?.();

  const due = tombstones.filter((t) => t.lastModified.getTime() <= scanStart - graceMs);
  const objectKeys = new Set(objects.map((o) => o.key));
  const deleted = due.map((t) => spilledKeyOfTombstone(t.key)).filter((key) => !references.has(key));
  const unmarked = due.map((t) => spilledKeyOfTombstone(t.key)).filter((key) => references.has(key));
  const tombstoned = new Set(tombstones.map((t) => spilledKeyOfTombstone(t.key)));
  const marked = objects
    .filter((o) => o.lastModified.getTime() <= listedAt - graceMs && !tombstoned.has(o.key) && !references.has(o.key))
    .map((o) => o.key);
  const report = {
    ...empty, referenced: objects.filter((o) => references.has(o.key)).length,
    deleted: deleted.filter((key) => objectKeys.has(key)), unmarked, marked, pending: tombstones.length - due.length,
  };
  if (dryRun) return report;

  const done: string[] = [];
  for (let i = 0; i < deleted.length; i += DELETES_PER_REQUEST) {
    if (options.shouldStop?.()) return { ...report, deleted: done.filter((key) => objectKeys.has(key)), unmarked: [], marked: [], stoppedBy: 'deadline' };
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
    if (stopped || options.shouldStop?.()) { stopped = true; return; }
    await putObject(s3, bucket, spillTombstoneKey(key), JSON.stringify({ object: key, markedAt: new Date(now()).toISOString() }), 'application/json', meter);
    tombstonesWritten++;
  });
  return { ...report, marked: stopped ? marked.slice(0, tombstonesWritten) : marked, ...(stopped ? { stoppedBy: 'deadline' as const } : {}) };
}

/** Adds the table's spill pointers into `bucket` to `references`; false when stopped before the end. */
async function scanPointers(
  options: SpillGcOptions, table: string, references: Set<string>, scan: { requests: number; items: number; readUnits: number },
): Promise<boolean> {
  let start: Record<string, AttributeValue> | undefined;
  do {
    if (options.shouldStop?.()) return false;
    const page = await options.dynamodb.send(new ScanCommand({
      TableName: table, ConsistentRead: true, ReturnConsumedCapacity: 'TOTAL',
      ProjectionExpression: '#s', FilterExpression: 'attribute_exists(#s)', ExpressionAttributeNames: { '#s': SPILL_ATTRIBUTE },
      ...(start ? { ExclusiveStartKey: start } : {}),
    }));
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
    start = page.LastEvaluatedKey;
  } while (start);
  return true;
}
