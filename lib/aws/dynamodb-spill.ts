/**
 * The `onUnwritableRow: 'spill'` policy of the DynamoDB upsert sink: an item over DynamoDB's 400 KB
 * limit keeps its key columns in the item and moves its largest other attributes, one by one until
 * the item fits, to S3 objects; the item holds a pointer per moved column in the reserved map
 * attribute `_spilled` (`column -> s3://bucket/key`). `scanDynamoDbSink` puts the values back.
 *
 * Objects are content-addressed: the key is `<prefix>_sluice_spill/<sha256 of the body>.json` (or
 * `<sha256>.<n>.json`, a variant, below) and the body is the column's DynamoDB attribute value as
 * JSON (what the item would have held), so a re-run of a batch writes the same objects again
 * (idempotent) and a reader can check what it got.
 *
 * Exactly once: a batch writes its objects before its items, so a visible item never points to a
 * missing object. A batch that fails after its objects (or a write skipped as stale), and every
 * change of a spilled value, leaves objects no item points to. They are never deleted by a writer:
 * a retry may still point to them, and another item may share one. A lifecycle rule must not expire
 * them either (a live item may point to an old object). The collector (dynamodb-spill-gc.ts)
 * deletes them in two runs, with a tombstone `<prefix>_sluice_spill_tombstones/<name>` between:
 *   run 1 marks an object older than the grace that no item of any sink table of the query (live,
 *     replay shadow, retired) points to; run 2, once the tombstone is older than the grace, scans
 *     again (strongly consistent) and deletes the object and then its tombstone, or drops only the
 *     tombstone when an item points to the object again;
 *   a writer looks up the tombstone of each object before writing it; when there is one it takes
 *     the next variant key instead, and it writes its items within SPILL_CHECK_VALID_MS of the
 *     look-up (else the batch fails, retryably, and looks again).
 * Why no visible item loses its object (G = the grace, which must exceed SPILL_CHECK_VALID_MS plus
 * the clocks' skew and a PutItem's SDK retries; the deleting scan starts after the tombstone's time + G):
 *   - a writer that looked before the tombstone existed put its item before the deleting scan
 *     started (look-up + SPILL_CHECK_VALID_MS < tombstone + G): the scan sees it and the object stays;
 *   - a writer that looks while the tombstone exists points to a variant, never to the marked key;
 *   - a writer that looks after the tombstone was deleted writes the object after the collector
 *     deleted it (object first, tombstone second), so its own write is the one that stays;
 *   - a retry rewriting the same key is one of these writers; another item sharing the object is an
 *     item the scan sees; a replay writes its items into its own table, which the pointer item
 *     names before any of its batches runs, and the collector reads the pointer after listing;
 *   - two collectors never run at once (a lease in the checkpoint table), so no stale run deletes an
 *     object a writer re-created after the other run dropped its tombstone.
 * A reader that holds a superseded item for longer than the grace may find its object deleted:
 * it reads the item again.
 */
import { createHash } from 'node:crypto';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import type { S3Client } from '@aws-sdk/client-s3';
import type { CostMeter } from '../core/cost-meter.js';
import { getObjectText, normalizePrefix, objectExists } from './s3-util.js';

/** The item attribute naming the spilled columns' objects. */
export const SPILL_ATTRIBUTE = '_spilled';
export const SPILL_DIR = '_sluice_spill/';
/** Tombstones of objects the collector found unreferenced (a sibling folder, so writers may read only it). */
export const SPILL_TOMBSTONE_DIR = '_sluice_spill_tombstones/';
/** A writer's tombstone look-up holds this long: its items must be written by then (Lambda's longest timeout). */
export const SPILL_CHECK_VALID_MS = 15 * 60_000;
/** Variants a writer tries before it gives up (each one tombstoned: the batch is retried later). */
const MAX_VARIANTS = 8;
const OBJECT_NAME = /(?:^|\/)([0-9a-f]{64})(?:\.(\d+))?\.json$/;

/** Where spilled values go: the sink's bucket, under the query's prefix. */
export interface SpillLocation {
  readonly client: S3Client;
  readonly bucket: string;
  readonly prefix: string;
  /** The writer's clock, for the look-up's validity (tests). */
  readonly now?: () => number;
}

export interface SpilledObject {
  readonly key: string;
  readonly body: string;
}

/** The key a spilled value's object has under `prefix` (content-addressed; variant 0 is the plain hash). */
export function spillObjectKey(prefix: string, body: string, variant = 0): string {
  return `${normalizePrefix(prefix)}${SPILL_DIR}${variantName(createHash('sha256').update(body).digest('hex'), variant)}`;
}

function variantName(hash: string, variant: number): string {
  return variant === 0 ? `${hash}.json` : `${hash}.${variant}.json`;
}

/** The key of `objectKey`'s tombstone, beside the spill folder. */
export function spillTombstoneKey(objectKey: string): string {
  const at = objectKey.lastIndexOf(SPILL_DIR);
  if (at < 0) throw new Error(`${objectKey} is not a spilled object's key`);
  return `${objectKey.slice(0, at)}${SPILL_TOMBSTONE_DIR}${objectKey.slice(at + SPILL_DIR.length)}`;
}

/** The object key a tombstone key stands for. */
export function spilledKeyOfTombstone(tombstoneKey: string): string {
  const at = tombstoneKey.lastIndexOf(SPILL_TOMBSTONE_DIR);
  return `${tombstoneKey.slice(0, at)}${SPILL_DIR}${tombstoneKey.slice(at + SPILL_TOMBSTONE_DIR.length)}`;
}

/** The spilled object key `s3://bucket/key` names in `bucket`, or null (another bucket, not a pointer). */
export function spilledKeyOfPointer(pointer: string, bucket: string): string | null {
  const match = /^s3:\/\/([^/]+)\/(.+)$/.exec(pointer);
  return match && match[1] === bucket ? match[2]! : null;
}

/**
 * The first variant of `object`'s key with no tombstone (one HEAD each, usually one): the key a
 * writer may point to for SPILL_CHECK_VALID_MS. Null when every variant is tombstoned.
 */
export async function unmarkedSpillKey(
  s3: S3Client, bucket: string, object: SpilledObject, meter?: CostMeter,
): Promise<string | null> {
  const hash = createHash('sha256').update(object.body).digest('hex');
  const folder = object.key.slice(0, object.key.length - `${hash}.json`.length);
  for (let variant = 0; variant < MAX_VARIANTS; variant++) {
    const key = `${folder}${variantName(hash, variant)}`;
    if (!await objectExists(s3, bucket, spillTombstoneKey(key), meter)) return key;
  }
  return null;
}

/**
 * `item` with its largest attributes (not `keep`) moved to objects until `size(item) <= maxBytes`,
 * largest first (ties by name, so the choice is the same on every run); null when it does not fit
 * even with every movable attribute moved.
 */
export function spillLargestAttributes(
  item: Record<string, AttributeValue>, keep: ReadonlySet<string>, bucket: string, prefix: string,
  maxBytes: number, size: (item: Record<string, AttributeValue>) => number,
): { item: Record<string, AttributeValue>; objects: SpilledObject[] } | null {
  const movable = Object.keys(item)
    .filter((name) => !keep.has(name))
    .map((name) => ({ name, bytes: size({ [name]: item[name]! }) }))
    .sort((a, b) => b.bytes - a.bytes || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const out = { ...item };
  const pointers: Record<string, AttributeValue> = {};
  const objects: SpilledObject[] = [];
  for (const { name } of movable) {
    const body = JSON.stringify(item[name]);
    const key = spillObjectKey(prefix, body);
    delete out[name];
    pointers[name] = { S: `s3://${bucket}/${key}` };
    objects.push({ key, body });
    out[SPILL_ATTRIBUTE] = { M: pointers };
    if (size(out) <= maxBytes) return { item: out, objects };
  }
  return null;
}

/** `item` with its spilled columns read back from S3 and the pointer map removed. */
export async function resolveSpilledAttributes(
  item: Record<string, AttributeValue>, s3: S3Client | undefined, meter?: CostMeter,
): Promise<Record<string, AttributeValue>> {
  const pointers = item[SPILL_ATTRIBUTE]?.M;
  if (!pointers) return item;
  if (!s3) throw new Error(`item ${item.pk?.S ?? '?'} has spilled values (${Object.keys(pointers).join(', ')}) in S3: pass an S3 client to read them`);
  const out = { ...item };
  delete out[SPILL_ATTRIBUTE];
  await Promise.all(Object.entries(pointers).map(async ([column, pointer]) => {
    const match = /^s3:\/\/([^/]+)\/(.+)$/.exec(pointer.S ?? '');
    if (!match) throw new Error(`item ${item.pk?.S ?? '?'}: spilled column ${column} has no s3:// pointer`);
    const [, bucket, key] = match;
    const body = await getObjectText(s3, bucket!, key!, meter);
    // Written before the item: a missing or different object means the bucket was tampered with.
    if (body === undefined) throw new Error(`item ${item.pk?.S ?? '?'}: spilled column ${column} points to s3://${bucket}/${key}, which does not exist`);
    if (OBJECT_NAME.exec(key!)?.[1] !== createHash('sha256').update(body).digest('hex')) {
      throw new Error(`item ${item.pk?.S ?? '?'}: s3://${bucket}/${key} does not hold the content its name hashes`);
    }
    out[column] = JSON.parse(body) as AttributeValue;
  }));
  return out;
}
