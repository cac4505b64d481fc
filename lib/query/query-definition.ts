/**
 * A deployable streaming query: what a user module exports for the Lambda handlers, `sluice dev`
 * and the CDK construct. The transformation is ordinary DataFrame code; the source, output mode
 * and sink are declared so they can be validated before anything runs (at `cdk synth`, too).
 */
import type { Trigger } from '../runtime/trigger.js';
import { deployedTrigger } from './deployed-trigger.js';
// zod/mini: see lib/runtime/runtime-config.ts (its load time is paid at every function's init).
import * as z from 'zod/mini';
import { en } from 'zod/locales';
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

interface QueryDefinitionCommon {
  /** Stable identity: the checkpoint and state are keyed by it. */
  readonly name: string;
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

/** A query over one Kinesis stream. */
export interface StreamingQueryDefinition extends QueryDefinitionCommon {
  readonly source: KinesisSourceSpec;
  readonly sources?: undefined;
  /** The query: from the decoded events to the result. */
  readonly transform: (events: DataFrame, session: SluiceSession) => DataFrame;
}

/**
 * A query over several Kinesis streams, each named, with its own schema, format and partition
 * key; the transform joins or unions them. Each stream's shards feed the watermark (Spark's
 * multiple-watermark policy: min by default, `spark.sql.streaming.multipleWatermarkPolicy: 'max'`).
 */
export interface MultiSourceQueryDefinition extends QueryDefinitionCommon {
  readonly source?: undefined;
  /** Source name (letters, digits, `_`; the construct's `streams` prop names them the same) to its spec. */
  readonly sources: Readonly<Record<string, KinesisSourceSpec>>;
  /** The query: from the decoded streams, by source name, to the result. */
  readonly transform: (streams: Readonly<Record<string, DataFrame>>, session: SluiceSession) => DataFrame;
}

/** What a query module may default-export: a query over one stream or over several. */
export type QueryDefinition = StreamingQueryDefinition | MultiSourceQueryDefinition;

/** Source names a multi-source definition may not use: ids the engine gives its own streams. */
export const RESERVED_SOURCE_NAMES: readonly string[] = ['kinesis', 'repartition', 'state'];

z.config(en());

const nonEmpty = () => z.string().check(z.minLength(1));
const sourceShape = z.object({
  format: z.optional(z.enum(['json', 'csv', 'raw'])),
  schema: z.union([nonEmpty(), z.array(z.object({ name: nonEmpty(), type: z.unknown() }))]),
  numericTimestamps: z.optional(z.enum(['seconds', 'millis', 'micros'])),
  csvDelimiter: z.optional(z.string().check(z.length(1))),
  partitionKey: z.optional(nonEmpty()),
});

const definitionShape = z.object({
  name: z.string().check(z.regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/, 'letters, digits, "_", "." and "-" only, at most 100 characters')),
  source: z.optional(sourceShape),
  sources: z.optional(z.record(
    z.string().check(
      z.regex(/^[A-Za-z][A-Za-z0-9_]{0,39}$/, 'a source name is a letter then letters, digits or "_", at most 40 characters'),
      z.refine((n) => !RESERVED_SOURCE_NAMES.includes(n.toLowerCase()), `reserved source name (${RESERVED_SOURCE_NAMES.join(', ')})`),
    ),
    sourceShape,
  ).check(z.refine((r) => Object.keys(r).length >= 1, 'name at least one source'))),
  transform: z.function(),
  outputMode: z.enum(['append', 'update', 'complete']),
  sink: z.discriminatedUnion('kind', [
    z.object({
      kind: z.literal('s3-files'), prefix: z.optional(z.string()), format: z.optional(z.enum(['jsonl', 'parquet'])),
      partitionBy: z.optional(z.array(nonEmpty())),
    }),
    z.object({ kind: z.literal('s3-snapshot'), prefix: z.optional(z.string()) }),
    z.object({
      kind: z.literal('dynamodb'), keyColumns: z.optional(z.array(nonEmpty()).check(z.minLength(1))), onUnwritableRow: z.optional(z.enum(UNWRITABLE_ROW_POLICIES)),
    }),
  ]),
  conf: z.optional(z.record(z.string(), z.string())),
  trigger: z.optional(z.union([
    z.object({ kind: z.literal('processingTime'), intervalMs: z.number().check(z.nonnegative()) }),
    z.object({ kind: z.enum(['availableNow', 'once']) }),
  ])),
}).check(z.refine((d) => (d.source === undefined) !== (d.sources === undefined), {
  message: 'give either source (one stream) or sources (several named streams), not both',
  path: ['source'],
}));

/** Checks the definition's shape at once; the query itself is analysed by `validateQuery`. */
export function defineQuery(definition: MultiSourceQueryDefinition): MultiSourceQueryDefinition;
export function defineQuery(definition: StreamingQueryDefinition): StreamingQueryDefinition;
export function defineQuery(definition: QueryDefinition): QueryDefinition {
  return checkQueryDefinition(definition);
}

/** `defineQuery` for a definition of either kind. */
export function checkQueryDefinition<D extends QueryDefinition>(definition: D): D {
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

/** A declared source stream: its name in the plan and offsets, and its spec. */
export interface NamedSource {
  readonly name: string;
  readonly spec: KinesisSourceSpec;
}

/**
 * The definition's source streams in declaration order. One `source` keeps the id it always had
 * (`kinesis`), so a single-stream query's checkpoints and offsets are unchanged.
 */
export function sourcesOf(definition: QueryDefinition): readonly NamedSource[] {
  if (definition.sources) return Object.entries(definition.sources).map(([name, spec]) => ({ name, spec }));
  return [{ name: SINGLE_SOURCE_NAME, spec: definition.source }];
}

/** The source id of a single-stream query's Kinesis stream in its plan and offsets. */
export const SINGLE_SOURCE_NAME = 'kinesis';

export function isMultiSource(definition: QueryDefinition): definition is MultiSourceQueryDefinition {
  return definition.sources !== undefined;
}
