/**
 * DynamoDbUpsertSink: one item per result key, for append, update and complete mode. The table's
 * partition key is the string attribute `pk`; there is no sort key.
 *
 * `pk` is the key columns' external values (timestamps as ISO strings), flattened and joined:
 *
 *   store_id=7|window.start=2024-05-01T14:00:00Z|window.end=2024-05-01T15:00:00Z
 *
 * - one `name=value` part per leaf, in `keyColumns` order; a struct column contributes one part per
 *   field, named `column.field` (recursively), in the struct's field order;
 * - numbers and booleans as JavaScript prints them (`7`, `1.5`, `true`, `NaN`); strings as they are, with `%`,
 *   `|` and `=` percent-encoded (`%25`, `%7C`, `%3D`) so parts cannot run together; arrays as their
 *   JSON text, encoded the same way; null (and a null struct) as `%00`, which no encoded string
 *   can contain. Column names are encoded the same way.
 * - With no key columns (a stateless append) `pk` is `${partitionId}#${batchId}#${rowIndex}`: one
 *   item per row, the same item again when the batch is re-run (re-runs have the same rows).
 *
 * The item is the row's external values as attributes (structs as maps, arrays as lists, null as
 * NULL; non-finite doubles as NULL, as in the JSON files; doubles beyond DynamoDB's number range as
 * their JSON text) plus `pk`, `_partition`, `_batchId` (and `_revision`, see below).
 * These names are reserved (and the spill pointer attribute): a result column with one of them is refused.
 *
 * Writes are PutItems conditioned on
 *
 *   attribute_not_exists(pk) OR _partition <> :partition OR _batchId < :batchId
 *     OR (_batchId = :batchId AND (attribute_not_exists(_revision) OR _revision <= :revision))
 *
 * so a re-run of the same batch rewrites the same value, and a stale or reordered write from a
 * partition never replaces a value that partition wrote in a later batch (the write is skipped and
 * counted in `stats.itemsSkippedStale`, not an error). Runs of one batch differ only when its
 * oldest planned records expired between them (SinkBatch.revision, kept as `_revision` when not 0):
 * a stale run of a lower revision never replaces the committed run's value. A key only the stale
 * run outputs is not fenced here (no item of the committed run is there to refuse it): the engine
 * prevents such a run instead, keeping a batch's records while they may expire so a later run
 * never loses them (lib/query/kept-records.ts). The one hole left: an attempt not at risk that
 * wrote and was killed, with no retry before its records expired; its rows may stay, and the loss
 * record says so. Batch ids count per partition, so they are
 * only compared within one: after a reshard the key's new partition starts again at low batch ids
 * and must still be able to write, and for a stateless append whose key repeats across shards the
 * last write wins.
 *
 * Before any PutItem, every row is checked against DynamoDB's limits (`rowLimits`, pure): a `pk`
 * over 2048 bytes (SINK_KEY_TOO_LONG), an item over 400 KB by DynamoDB's size formula
 * (SINK_ITEM_TOO_LARGE), values nested over 32 levels or that do not marshal
 * (SINK_VALUE_NOT_ENCODABLE). Such a row fails every retry, so a batch holding one writes nothing
 * and throws UnwritableRowsError; the shard invocation resolves it by the query's onUnwritableRow.
 * With `spill` (the 'spill' policy) an item over 400 KB is not refused: its largest non-key values
 * go to S3 objects, written before any item of the batch, and the item holds pointers
 * (lib/aws/dynamodb-spill.ts); only a key too long, a value that cannot be encoded, or an item
 * whose key columns alone pass 400 KB is still refused. Before writing an object the sink looks up
 * its tombstone (the spill collector marked it for deletion) and then points to an unmarked variant
 * key instead; its items must follow within SPILL_CHECK_VALID_MS of that look-up, or the batch
 * fails, retryably (the collector's safety rests on that bound: dynamodb-spill.ts).
 *
 * Rows of one batch with the same `pk` are written once, the last row winning (as if in order).
 * Up to `concurrency` (64 to start) PutItems are in flight, fewer after throttling (halved on a
 * throttle, the item retried after a back-off; one more after as many successes: see
 * adaptive-concurrency.ts). A write still throttled after a few tries, and any transient failure,
 * is thrown as a retryable SluiceError (code SINK_THROTTLED / SINK_WRITE_FAILED) after the SDK's
 * own retries; re-running the batch is safe. Write capacity is counted from ReturnConsumedCapacity TOTAL, or,
 * when the response omits it and for writes skipped by the condition (which AWS also charges),
 * from DynamoDB's item-size formula.
 */
import {
  ConditionalCheckFailedException,
  PutItemCommand,
  type AttributeValue,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { createHash } from 'node:crypto';
import { marshall, NumberValueImpl } from '@aws-sdk/util-dynamodb';
import { Decimal } from '../core/decimal.js';
import { stringifyWithLongs } from '../core/long.js';
import { IllegalArgumentError, StreamingQueryError } from '../errors/sluice-error.js';
import type { OutputMode } from '../core/output-mode.js';
import type { DataType, StructField } from '../plan/data-types.js';
import type { CostMeter } from '../core/cost-meter.js';
import { toExternalRow, toExternalValue } from '../sinks/external-row.js';
import type { Sink, SinkBatch } from '../sinks/sink.js';
import { UnwritableRowsError, type RowRefusal, type SinkRowLimits, type UnwritableRow } from '../sinks/row-limits.js';
import { mapWithConcurrency, putObject, toSinkError } from './s3-util.js';
import { AdaptiveConcurrency, runAdaptive } from './adaptive-concurrency.js';
import { SINK_OUTPUT_MODES } from '../sinks/sink-output-modes.js';
import {
  SPILL_ATTRIBUTE, SPILL_CHECK_VALID_MS, spillLargestAttributes, unmarkedSpillKey, type SpilledObject, type SpillLocation,
} from './dynamodb-spill.js';

/**
 * A write replaces an item of another partition, of an older batch of its partition, or of the same
 * batch at the same or a lower revision (SinkBatch.revision; an item without `_revision` is revision 0).
 */
const FENCE = 'attribute_not_exists(pk) OR #p <> :partition OR #b < :batchId OR (#b = :batchId AND (attribute_not_exists(#r) OR #r <= :revision))';

export const DYNAMODB_SINK_RESERVED = ['pk', '_partition', '_batchId', '_revision', SPILL_ATTRIBUTE] as const;
/** S3 PUTs of spilled values in flight (objects are few and large). */
const SPILL_PUTS_IN_FLIGHT = 8;
/** Bytes kept free in a spilled item for its pointers' variant suffixes (a few pointers, `.<n>` each). */
const VARIANT_ROOM_BYTES = 64;
/** DynamoDB's limit on a partition key value, in UTF-8 bytes. */
export const MAX_PK_BYTES = 2048;
/** DynamoDB's item limit, 400 KB, counted by its size formula (names and values). */
export const MAX_ITEM_BYTES = 400 * 1024;
/** DynamoDB's limit on nested lists and maps. */
const MAX_NESTING_DEPTH = 32;
const NULL_TOKEN = '%00';

export interface DynamoDbUpsertSinkOptions {
  readonly client: DynamoDBClient;
  readonly tableName: string;
  /** Result columns that identify a row (the grouping columns); empty for a stateless append. */
  readonly keyColumns: readonly string[];
  readonly meter?: CostMeter;
  /** PutItems in flight at first (default 64; it adapts to throttling). */
  readonly concurrency?: number;
  /** The 'spill' policy: where values of items over 400 KB go (absent: such rows are refused). */
  readonly spill?: SpillLocation;
}

function encodePart(text: string): string {
  return text.replace(/[%|=]/g, (c) => (c === '%' ? '%25' : c === '|' ? '%7C' : '%3D'));
}

function encodeLeaf(value: unknown): string {
  if (value === null || value === undefined) return NULL_TOKEN;
  if (typeof value === 'string') return encodePart(value);
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean' || value instanceof Decimal) return String(value);
  return encodePart(JSON.stringify(value));
}

function flattenKey(name: string, type: DataType, external: unknown, parts: string[]): void {
  if (typeof type === 'object' && type.kind === 'struct') {
    if (external === null || external === undefined) {
      parts.push(`${encodePart(name)}=${NULL_TOKEN}`);
      return;
    }
    const struct = external as Record<string, unknown>;
    for (const f of type.fields) flattenKey(`${name}.${f.name}`, f.type, struct[f.name], parts);
    return;
  }
  parts.push(`${encodePart(name)}=${encodeLeaf(external)}`);
}

/** The `pk` of a row (see the file comment); `keyIndexes` are the key columns' schema positions. */
export function encodeDynamoDbKey(
  row: readonly unknown[], schema: readonly StructField[], keyIndexes: readonly number[],
): string {
  const parts: string[] = [];
  for (const i of keyIndexes) {
    const field = schema[i]!;
    flattenKey(field.name, field.type, toExternalValue(row[i], field.type), parts);
  }
  return parts.join('|');
}

/**
 * Numbers DynamoDB cannot store: non-finite doubles become NULL (the JSON files write null), and
 * finite doubles outside DynamoDB's range (magnitude 1e-130 to below 1e126) their JSON text, so the
 * value is kept rather than failing the batch on every retry.
 */
function toDynamoDbValue(value: unknown): unknown {
  // DynamoDB numbers hold 38 digits: a decimal keeps all of its own, exactly.
  if (value instanceof Decimal) return NumberValueImpl.from(value.toString());
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) return null;
    const magnitude = Math.abs(value);
    return magnitude !== 0 && (magnitude >= 1e126 || magnitude < 1e-130) ? JSON.stringify(value) : value;
  }
  if (Array.isArray(value)) return value.map(toDynamoDbValue);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toDynamoDbValue(v)]));
  }
  return value;
}

/** `item` with its spill pointers moved to the keys the objects were written under. */
function repointed(item: Record<string, AttributeValue>, bucket: string, keys: ReadonlyMap<string, string>): Record<string, AttributeValue> {
  const pointers = item[SPILL_ATTRIBUTE]?.M;
  if (!pointers) return item;
  const moved = Object.fromEntries(Object.entries(pointers).map(([column, pointer]) => {
    const key = pointer.S!.slice(`s3://${bucket}/`.length);
    return [column, { S: `s3://${bucket}/${keys.get(key) ?? key}` }];
  }));
  return { ...item, [SPILL_ATTRIBUTE]: { M: moved } };
}

function utf8Bytes(s: string): number {
  return Buffer.byteLength(s, 'utf-8');
}

/** An attribute value's size by DynamoDB's published formula. */
function attributeSize(v: AttributeValue): number {
  if (v.S !== undefined) return utf8Bytes(v.S);
  if (v.N !== undefined) {
    const digits = v.N.replace(/^-/, '').replace(/e.*$/i, '').replace('.', '').replace(/^0+/, '').replace(/0+$/, '');
    return Math.ceil(Math.max(1, digits.length) / 2) + 1;
  }
  if (v.B !== undefined) return v.B.byteLength;
  if (v.BOOL !== undefined || v.NULL !== undefined) return 1;
  if (v.L !== undefined) return 3 + v.L.reduce((n, e) => n + 1 + attributeSize(e), 0);
  if (v.M !== undefined) return 3 + Object.entries(v.M).reduce((n, [k, e]) => n + 1 + utf8Bytes(k) + attributeSize(e), 0);
  if (v.SS !== undefined) return v.SS.reduce((n, s) => n + utf8Bytes(s), 0);
  if (v.NS !== undefined) return v.NS.reduce((n, s) => n + attributeSize({ N: s }), 0);
  if (v.BS !== undefined) return v.BS.reduce((n, b) => n + b.byteLength, 0);
  return 0;
}

/** An item's size by DynamoDB's formula: attribute names and values, in bytes. */
export function itemBytes(item: Record<string, AttributeValue>): number {
  return Object.entries(item).reduce((n, [k, v]) => n + utf8Bytes(k) + attributeSize(v), 0);
}

/** Write capacity units a standard PutItem of `item` costs: one per started KiB. */
export function writeUnitsFor(item: Record<string, AttributeValue>): number {
  return Math.max(1, Math.ceil(itemBytes(item) / 1024));
}

/** How deep lists and maps nest (DynamoDB refuses more than 32 levels). */
function nestingDepth(value: unknown): number {
  if (value === null || typeof value !== 'object') return 0;
  let deepest = 0;
  for (const v of Array.isArray(value) ? value : Object.values(value)) deepest = Math.max(deepest, nestingDepth(v));
  return deepest + 1;
}

export interface DynamoDbUpsertSinkStats {
  itemsWritten: number;
  itemsSkippedStale: number;
}

export class DynamoDbUpsertSink implements Sink {
  readonly supportedOutputModes = SINK_OUTPUT_MODES.dynamodb;
  readonly description: string;
  /** Cumulative: items put, and items skipped because the table held a later batch's value. */
  readonly stats: DynamoDbUpsertSinkStats = { itemsWritten: 0, itemsSkippedStale: 0 };
  private readonly client: DynamoDBClient;
  private readonly tableName: string;
  private readonly keyColumns: readonly string[];
  private readonly meter: CostMeter | undefined;
  private readonly spill: SpillLocation | undefined;
  /** PutItems in flight: kept between batches (and invocations of a warm container). */
  readonly inFlight: AdaptiveConcurrency;

  constructor(options: DynamoDbUpsertSinkOptions) {
    this.client = options.client;
    this.tableName = options.tableName;
    this.keyColumns = [...options.keyColumns];
    this.meter = options.meter;
    this.spill = options.spill;
    const initial = Math.max(1, options.concurrency ?? 64);
    this.inFlight = new AdaptiveConcurrency(initial, Math.min(4, initial), Math.max(256, initial));
    if (new Set(this.keyColumns).size !== this.keyColumns.length) {
      throw new IllegalArgumentError(`DynamoDbUpsertSink key columns repeat: ${this.keyColumns.join(', ')}`, {
        code: 'SINK_KEY_COLUMNS_INVALID',
      });
    }
    this.description = `DynamoDbUpsertSink[${this.tableName}${this.keyColumns.length ? ` by ${this.keyColumns.join(', ')}` : ''}]`;
  }

  /** Key length, item size and encodable values, checked on every row before a batch writes. */
  readonly rowLimits: SinkRowLimits = {
    rowKey: (batch, rowIndex) => {
      const keyIndexes = this.validate(batch.schema, batch.outputMode);
      if (keyIndexes.length > 0) return encodeDynamoDbKey(batch.rows[rowIndex]!, batch.schema, keyIndexes);
      // A keyless item is named by its row index, which moves when a re-run leaves rows out: the
      // row's content names it instead.
      return `row:${createHash('sha256').update(stringifyWithLongs(toExternalRow(batch.rows[rowIndex]!, batch.schema))).digest('base64')}`;
    },
    check: (batch, rowIndex) => this.itemFor(batch, rowIndex, this.validate(batch.schema, batch.outputMode)).refusal,
  };

  async addBatch(batch: SinkBatch): Promise<void> {
    const keyIndexes = this.validate(batch.schema, batch.outputMode);
    // Last row per pk wins, so the table's value does not depend on which PutItem finished last.
    const byPk = new Map<string, { item: Record<string, AttributeValue>; spilled: readonly SpilledObject[] }>();
    const refused: UnwritableRow[] = [];
    for (let rowIndex = 0; rowIndex < batch.rows.length; rowIndex++) {
      const { pk, item, spilled, refusal } = this.itemFor(batch, rowIndex, keyIndexes);
      if (refusal) {
        refused.push({ rowIndex, rowKey: pk, refusal });
        continue;
      }
      byPk.delete(pk);
      byPk.set(pk, { item: item!, spilled });
    }
    // Nothing is written when any row would fail: a half-written batch would leave rows no commit holds.
    if (refused.length > 0) throw new UnwritableRowsError(this.description, batch.batchId, refused);
    const objects = new Map([...byPk.values()].flatMap((w) => w.spilled.map((o) => [o.key, o] as const)));
    let checkedAt: number | undefined;
    let writes = [...byPk.values()];
    if (objects.size > 0) {
      checkedAt = this.now();
      const keys = await this.unmarkedKeys([...objects.values()]);
      // Every object before any item: a visible item never points to an object not yet written.
      await mapWithConcurrency([...objects.values()], SPILL_PUTS_IN_FLIGHT, (o) => this.putSpilled({ key: keys.get(o.key)!, body: o.body }));
      writes = writes.map((w) => ({ ...w, item: repointed(w.item, this.spill!.bucket, keys) }));
    }
    await runAdaptive(writes, this.inFlight, ({ item }) => {
      if (checkedAt !== undefined && this.now() - checkedAt > SPILL_CHECK_VALID_MS) throw this.checkExpired();
      return this.put(item, batch);
    }, {
      isThrottle: (error) => (error as { code?: string }).code === 'SINK_THROTTLED',
    });
  }

  private now(): number {
    return (this.spill?.now ?? Date.now)();
  }

  /** Each object's key, or an unmarked variant of it when the collector tombstoned the key. */
  private async unmarkedKeys(objects: readonly SpilledObject[]): Promise<Map<string, string>> {
    const { client, bucket } = this.spill!;
    const keys = await mapWithConcurrency(objects, SPILL_PUTS_IN_FLIGHT, async (o) => {
      let key: string | null;
      try {
        key = await unmarkedSpillKey(client, bucket, o, this.meter);
      } catch (error) {
        throw toSinkError(error, this.description, `HeadObject of a spilled value's tombstone in s3://${bucket}`);
      }
      if (key === null) {
        throw new StreamingQueryError(`${this.description}: every variant of ${o.key} is marked for deletion by the spill collector`, {
          code: 'SINK_WRITE_FAILED', retryable: true, hint: 'the batch is retried; the collector deletes or unmarks them at its next run.',
        });
      }
      return [o.key, key] as const;
    });
    return new Map(keys);
  }

  private checkExpired(): Error {
    return new StreamingQueryError(`${this.description}: the batch's items would be written over ${SPILL_CHECK_VALID_MS / 60_000} minutes after its spilled objects were checked against the collector's tombstones`, {
      code: 'SINK_WRITE_FAILED', retryable: true, hint: 'the batch is retried and checks again; the spill collector relies on this bound.',
    });
  }

  /** The row's key and item, or why DynamoDB would refuse them (on every retry). */
  private itemFor(batch: SinkBatch, rowIndex: number, keyIndexes: readonly number[]): {
    pk: string; item: Record<string, AttributeValue> | null; spilled: readonly SpilledObject[]; refusal: RowRefusal | null;
  } {
    const row = batch.rows[rowIndex]!;
    const pk = keyIndexes.length === 0
      ? `${batch.partitionId}#${batch.batchId}#${rowIndex}`
      : encodeDynamoDbKey(row, batch.schema, keyIndexes);
    const pkBytes = utf8Bytes(pk);
    if (pkBytes > MAX_PK_BYTES) {
      return { pk, item: null, spilled: [], refusal: { code: 'SINK_KEY_TOO_LONG', reason: `the item key (pk, from ${this.keyColumns.join(', ')}) is ${pkBytes} bytes, over DynamoDB's partition-key limit of ${MAX_PK_BYTES} bytes` } };
    }
    const attributes = toDynamoDbValue(toExternalRow(row, batch.schema)) as Record<string, unknown>;
    const depth = nestingDepth(attributes);
    if (depth > MAX_NESTING_DEPTH) {
      return { pk, item: null, spilled: [], refusal: { code: 'SINK_VALUE_NOT_ENCODABLE', reason: `values nest ${depth} levels deep, over DynamoDB's ${MAX_NESTING_DEPTH}` } };
    }
    let item: Record<string, AttributeValue>;
    try {
      item = marshall(
        { ...attributes, pk, _partition: batch.partitionId, _batchId: batch.batchId, ...(batch.revision ? { _revision: batch.revision } : {}) },
        { removeUndefinedValues: true, allowImpreciseNumbers: true },
      );
    } catch (error) {
      // The marshaller's message may quote the value: only its class goes into the reason.
      return { pk, item: null, spilled: [], refusal: { code: 'SINK_VALUE_NOT_ENCODABLE', reason: `the row's values cannot be marshalled to DynamoDB attributes (${(error as Error).name})` } };
    }
    const bytes = itemBytes(item);
    if (bytes <= MAX_ITEM_BYTES) return { pk, item, spilled: [], refusal: null };
    if (this.spill) {
      const keep = new Set<string>([...DYNAMODB_SINK_RESERVED, ...this.keyColumns]);
      // Room for a variant's suffix (`.<n>`) in each pointer, should a tombstone move it.
      const spilled = spillLargestAttributes(item, keep, this.spill.bucket, this.spill.prefix, MAX_ITEM_BYTES - VARIANT_ROOM_BYTES, itemBytes);
      if (spilled) return { pk, item: spilled.item, spilled: spilled.objects, refusal: null };
    }
    const afterSpill = this.spill ? ', even with every non-key value spilled to S3' : '';
    return { pk, item: null, spilled: [], refusal: { code: 'SINK_ITEM_TOO_LARGE', reason: `the item is ${bytes} bytes by DynamoDB's size formula, over its 400 KB item limit (${MAX_ITEM_BYTES} bytes)${afterSpill}` } };
  }

  private validate(schema: readonly StructField[], mode: OutputMode): number[] {
    for (const f of schema) {
      if ((DYNAMODB_SINK_RESERVED as readonly string[]).includes(f.name)) {
        throw new IllegalArgumentError(`${this.description}: result column '${f.name}' clashes with the sink's own attribute`, {
          code: 'SINK_RESERVED_COLUMN', hint: `rename it with .as(...); ${DYNAMODB_SINK_RESERVED.join(', ')} are reserved.`,
        });
      }
    }
    if (this.keyColumns.length === 0 && mode !== 'append') {
      throw new IllegalArgumentError(`${this.description}: ${mode} mode needs key columns, or every batch would add new items for the same groups`, {
        code: 'SINK_KEY_COLUMNS_REQUIRED', hint: 'pass keyColumns: the query\'s grouping columns (e.g. [\'window\', \'store\']).',
      });
    }
    return this.keyColumns.map((name) => {
      const index = schema.findIndex((f) => f.name === name);
      if (index < 0) {
        throw new IllegalArgumentError(`${this.description}: key column '${name}' is not in the result (${schema.map((f) => f.name).join(', ')})`, {
          code: 'SINK_KEY_COLUMN_MISSING',
        });
      }
      return index;
    });
  }

  private async putSpilled(object: SpilledObject): Promise<void> {
    const { client, bucket } = this.spill!;
    try {
      await putObject(client, bucket, object.key, object.body, 'application/json', this.meter);
    } catch (error) {
      throw toSinkError(error, this.description, `PutObject of a spilled value to s3://${bucket}`);
    }
  }

  private async put(item: Record<string, AttributeValue>, batch: SinkBatch): Promise<void> {
    try {
      const response = await this.client.send(new PutItemCommand({
        TableName: this.tableName,
        Item: item,
        ConditionExpression: FENCE,
        ExpressionAttributeNames: { '#p': '_partition', '#b': '_batchId', '#r': '_revision' },
        ExpressionAttributeValues: {
          ':partition': { S: batch.partitionId }, ':batchId': { N: String(batch.batchId) }, ':revision': { N: String(batch.revision ?? 0) },
        },
        ReturnConsumedCapacity: 'TOTAL',
      }));
      this.meter?.add('dynamoDbWriteUnits', response.ConsumedCapacity?.CapacityUnits ?? writeUnitsFor(item));
      this.stats.itemsWritten++;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException || (error as { name?: string })?.name === 'ConditionalCheckFailedException') {
        this.meter?.add('dynamoDbWriteUnits', writeUnitsFor(item));
        this.stats.itemsSkippedStale++;
        return;
      }
      throw toSinkError(error, this.description, `PutItem into ${this.tableName}`);
    }
  }
}
