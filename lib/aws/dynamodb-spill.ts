/**
 * The `onUnwritableRow: 'spill'` policy of the DynamoDB upsert sink: an item over DynamoDB's 400 KB
 * limit keeps its key columns in the item and moves its largest other attributes, one by one until
 * the item fits, to S3 objects; the item holds a pointer per moved column in the reserved map
 * attribute `_spilled` (`column -> s3://bucket/key`). `scanDynamoDbSink` puts the values back.
 *
 * Objects are content-addressed: the key is `<prefix>_sluice_spill/<sha256 of the body>.json` and the
 * body is the column's DynamoDB attribute value as JSON (what the item would have held), so a
 * re-run of a batch writes the same objects again (idempotent) and a reader can check what it got.
 *
 * Exactly once: a batch writes its objects before its items, so a visible item never points to a
 * missing object. A batch that fails after its objects (or a write skipped as stale) leaves objects
 * no item points to; they are never read, only stored. Objects are never deleted, not even when a
 * later batch replaces the item: a reader may still hold the old item, and the same value may be
 * shared by other items (content addressing). Orphans therefore accumulate with every change of a
 * spilled value; a lifecycle rule must not expire them (a live item may point to an old object).
 */
import { createHash } from 'node:crypto';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import type { S3Client } from '@aws-sdk/client-s3';
import type { CostMeter } from '../core/cost-meter.js';
import { getObjectText, normalizePrefix } from './s3-util.js';

/** The item attribute naming the spilled columns' objects. */
export const SPILL_ATTRIBUTE = '_spilled';
const SPILL_DIR = '_sluice_spill/';

/** Where spilled values go: the sink's bucket, under the query's prefix. */
export interface SpillLocation {
  readonly client: S3Client;
  readonly bucket: string;
  readonly prefix: string;
}

export interface SpilledObject {
  readonly key: string;
  readonly body: string;
}

/** The key a spilled value's object has under `prefix` (content-addressed). */
export function spillObjectKey(prefix: string, body: string): string {
  return `${normalizePrefix(prefix)}${SPILL_DIR}${createHash('sha256').update(body).digest('hex')}.json`;
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
    if (!key!.endsWith(`${createHash('sha256').update(body).digest('hex')}.json`)) {
      throw new Error(`item ${item.pk?.S ?? '?'}: s3://${bucket}/${key} does not hold the content its name hashes`);
    }
    out[column] = JSON.parse(body) as AttributeValue;
  }));
  return out;
}
