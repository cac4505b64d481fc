/**
 * A deployable streaming query: what a user module exports for the Lambda handlers, `sluice dev`
 * and the CDK construct. The transformation is ordinary DataFrame code; the source, output mode
 * and sink are declared so they can be validated before anything runs (at `cdk synth`, too).
 */
import type { Trigger } from '../runtime/trigger.js';
import { deployedTrigger } from './deployed-trigger.js';
import * as z from 'zod';
import type { OutputMode } from '../core/output-mode.js';
import type { DataFrame } from '../api/data-frame.js';
import type { SchemaLike, SluiceSession } from '../api/session.js';
import { IllegalArgumentError } from '../errors/sluice-error.js';
import { UNWRITABLE_ROW_POLICIES, type UnwritableRowPolicy } from '../sinks/row-limits.js';

export interface KinesisSourceSpec {
  /** Record payload format: JSON objects (default), CSV lines in schema order, or raw UTF-8 strings. */
  readonly format?: 'json' | 'csv' | 'raw';
  /** Column names and types; `raw` ignores it and yields one `value string` column. */
  readonly schema: SchemaLike;
  /** How a JSON number in a timestamp column is read (strings are ISO-8601). Default seconds, as Spark casts. */
  readonly numericTimestamps?: 'seconds' | 'millis' | 'micros';
  /** CSV field separator (default `,`). */
  readonly csvDelimiter?: string;
  /**
   * The column(s) the producer uses as the Kinesis partition key. Declaring it lets a stateful
   * query run on many shards: every group keyed by it lives on one shard. Records whose partition
   * key does not match the column go to the dead-letter location.
   */
  readonly partitionKey?: string;
}

/** Where results go; bucket and table names come from the deployment (environment). */
export type SinkSpec =
  /**
   * Append-only files under a prefix (a table location: readers listing it see committed batches
   * only), JSON Lines (default) or Parquet, in Hive-style folders of the `partitionBy` columns.
   */
  | {
    readonly kind: 's3-files'; readonly prefix?: string; readonly format?: 'jsonl' | 'parquet';
    /** Result columns whose values name the folders (`dt=2026-12-01/`), outermost first: Spark's partitionBy. */
    readonly partitionBy?: readonly string[];
  }
  /** The whole result table as one object per batch, replaced atomically through a pointer. */
  | { readonly kind: 's3-snapshot'; readonly prefix?: string }
  /** One item per result key, upserted with a version condition. */
  | {
    readonly kind: 'dynamodb';
    readonly keyColumns?: readonly string[];
    /**
     * A result row DynamoDB cannot store (key over 2048 bytes, item over 400 KB, a value it cannot
     * encode) would fail every retry. 'dead-letter' (the default): before anything is written, the
     * batch's input records that produce the row go to the dead-letter location with the limit it
     * broke, and the batch runs without them; the group keeps its last storable value. 'spill': an
     * item over 400 KB keeps its key columns and moves its largest values to S3 objects in the
     * sink bucket (the construct creates one), with pointers in the item that `scanDynamoDbSink`
     * follows; what spilling cannot fix (a key too long) is dead-lettered as above.
     */
    readonly onUnwritableRow?: UnwritableRowPolicy;
  };

export interface StreamingQueryDefinition {
  /** Stable identity: the checkpoint and state are keyed by it. */
  readonly name: string;
  readonly source: KinesisSourceSpec;
  /** The query: from the decoded events to the result. */
  readonly transform: (events: DataFrame, session: SluiceSession) => DataFrame;
  readonly outputMode: OutputMode;
  readonly sink: SinkSpec;
  /** `spark.sql.*` confs (e.g. the multiple-watermark policy). */
  readonly conf?: Readonly<Record<string, string>>;
  /**
   * When batches run, as Spark names it: `Trigger.ProcessingTime('1 minute')` sets the source
   * mapping's batching window (at most 300 s); `Trigger.AvailableNow()` runs the query on the
   * schedule only, draining the stream (lib/query/deployed-trigger.ts). Default: on arrival.
   */
  readonly trigger?: Trigger;
}

const definitionShape = z.object({
  name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/, 'letters, digits, "_", "." and "-" only, at most 100 characters'),
  source: z.object({
    format: z.enum(['json', 'csv', 'raw']).optional(),
    schema: z.union([z.string().min(1), z.array(z.object({ name: z.string().min(1), type: z.unknown() }))]),
    numericTimestamps: z.enum(['seconds', 'millis', 'micros']).optional(),
    csvDelimiter: z.string().length(1).optional(),
    partitionKey: z.string().min(1).optional(),
  }),
  transform: z.function(),
  outputMode: z.enum(['append', 'update', 'complete']),
  sink: z.discriminatedUnion('kind', [
    z.object({
      kind: z.literal('s3-files'), prefix: z.string().optional(), format: z.enum(['jsonl', 'parquet']).optional(),
      partitionBy: z.array(z.string().min(1)).optional(),
    }),
    z.object({ kind: z.literal('s3-snapshot'), prefix: z.string().optional() }),
    z.object({
      kind: z.literal('dynamodb'), keyColumns: z.array(z.string().min(1)).min(1).optional(), onUnwritableRow: z.enum(UNWRITABLE_ROW_POLICIES).optional(),
    }),
  ]),
  conf: z.record(z.string(), z.string()).optional(),
  trigger: z.union([
    z.object({ kind: z.literal('processingTime'), intervalMs: z.number().nonnegative() }),
    z.object({ kind: z.enum(['availableNow', 'once']) }),
  ]).optional(),
});

/** Checks the definition's shape at once; the query itself is analysed by `validateQuery`. */
export function defineQuery(definition: StreamingQueryDefinition): StreamingQueryDefinition {
  const parsed = definitionShape.safeParse(definition);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || '(definition)'}: ${i.message}`).join('; ');
    throw new IllegalArgumentError(`Invalid streaming query definition: ${problems}`, {
      code: 'INVALID_QUERY_DEFINITION',
      hint: 'see StreamingQueryDefinition in lib/query/query-definition.ts for the fields and their types.',
    });
  }
  deployedTrigger(definition.trigger); // a trigger Lambda cannot honour is refused here, with what to use
  return definition;
}
