/**
 * SluiceQuery: one Sluice query deployed as a serverless pipeline.
 *
 *   Kinesis stream ──(event source mapping, one batch of one shard = one micro-batch)──▶ Kinesis-trigger function
 *   EventBridge schedule ──(no-data batches, idle shards, `{ "mode": "drain" }`)──────────▶ scheduled function
 *   both ──▶ checkpoint + state tables (DynamoDB), the sink (S3 files / S3 snapshot / DynamoDB), dead letters (S3)
 *   batches that exhaust retries ──▶ on-failure SQS queue;  CloudWatch alarms on lag, errors, bad and late input
 *
 * A stateful query whose state keys the stream is not partitioned by gets a repartition stage
 * (Spark's shuffle): the Kinesis-trigger function runs stage 1 and routes rows by state key to an
 * internal stream, whose own event source mapping runs stage 2 (state and sink) per internal shard:
 *
 *   Kinesis stream ──▶ Kinesis-trigger function (stage 1) ──PutRecords──▶ internal stream ──▶ repartition function (stage 2) ──▶ sink
 *
 * The query module is loaded and validated with the engine's analyzer when the construct is
 * created, so `cdk synth` refuses a query the runtime would refuse (unsupported shape for the
 * output mode, a sink that cannot take the mode, a query that cannot be split into stages, or,
 * with `repartition: false`, state not co-partitioned with the stream).
 */
import { deployedTrigger } from '../lib/query/validate-query.js';
import { Annotations, CfnOutput, Duration, RemovalPolicy, Stack, Stage, Token } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kinesis from 'aws-cdk-lib/aws-kinesis';
import type * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsDlq, SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { isMultiSource, type QueryDefinition } from '../lib/query/query-definition.js';
import { METRIC, METRIC_DIMENSION_QUERY, METRICS_NAMESPACE } from '../lib/runtime/metric-names.js';
import {
  DEPLOYMENT_DEFAULTS, DEPLOYMENT_OUTPUT_DESCRIPTION, PROGRESS_RECORDS, TABLE_KEYS, runtimeConfigToEnv, sinkPrefixFor,
  type DeploymentDescriptor, type RuntimeConfig,
} from '../lib/runtime/runtime-config.js';
import { writeHandlerEntry, type HandlerKind } from './generated-entry.js';
import { handlerBundling } from './bundling.js';
import { addKinesisEventSource } from './event-sources.js';
import { accessOf, deadLetterObjectPrefix, grantFunctionAccess, type QueryResources } from './grants.js';
import { acknowledge } from './nag-acknowledgments.js';
import { entriesDirFor, findProject, type ProjectPaths } from './project.js';
import { checkIntegerProp, checkSynthTimeDurationProp } from './props.js';
import { compactionConfig, type SinkCompactionOptions } from './compaction.js';
import { resolveQueryModulePath } from '../lib/query/query-module.js';
import { loadQueryModule } from './query-module.js';
import { createLakeTable, type LakeTableOptions, type SluiceLakeTable } from './lake-table.js';
import type { LakeTableShape } from '../lib/query/validate-query.js';
import { DEFAULT_DASHBOARD_PRICES, createQueryDashboard, type DashboardPrices } from './dashboard.js';
import { SKIPPED_RANGES_SUFFIX, TRACING_ENV } from '../lib/runtime/runtime-config.js';

/**
 * The `service` dimension Powertools Metrics adds next to `query` (lib/aws/observability.ts
 * creates its Metrics with serviceName 'sluice'). A CloudWatch metric is identified by its full
 * dimension set, so the alarms name both.
 */
export const METRIC_SERVICE_DIMENSION = { name: 'service', value: 'sluice' } as const;

/** The internal stream holds only records in flight between the stages. */
const REPARTITION_RETENTION = Duration.hours(24);
const DEFAULT_REPARTITION_SHARDS = 2;

const ONE_HOUR = Duration.hours(1);
const MIN_RECORD_AGE = Duration.seconds(60);
const MAX_RECORD_AGE = Duration.days(7);
/** Dead letters hold raw records (often personal data): kept a few weeks unless said otherwise. */
const DEFAULT_DEAD_LETTER_RETENTION = Duration.days(30);

export interface SluiceQueryProps {
  /**
   * Path to the query module: a TypeScript/JavaScript module whose default export is a
   * `QueryDefinition` (see examples/). Absolute, or relative to the directory `cdk` runs
   * in. It is loaded and validated at synth time and bundled into both functions.
   */
  readonly queryModule: string;

  /**
   * The project the query module belongs to: the functions are bundled from it, and `sluice` (with
   * the module's other imports) is resolved from its `node_modules`. Generated entry files go under
   * the app's output directory (`cdk.out`).
   *
   * @default - the directory of `depsLockFilePath` if given, else the nearest directory above the
   * query module that holds a lockfile (package-lock.json, yarn.lock, pnpm-lock.yaml, bun.lock(b))
   */
  readonly projectRoot?: string;

  /**
   * The project's lockfile (NodejsFunction picks the package manager from it).
   *
   * @default - the nearest lockfile above the query module (or in `projectRoot`)
   */
  readonly depsLockFilePath?: string;

  /**
   * The Kinesis stream to read. Several queries may share one stream (each gets its own event
   * source mapping).
   *
   * @default - a new provisioned stream with `shardCount` shards, `streamRetention`, and
   * server-side encryption with the AWS-managed key
   */
  readonly stream?: kinesis.IStream;

  /**
   * A query over several streams (`sources` in its definition): the Kinesis stream of each source,
   * by source name. The Kinesis-trigger function gets an event source mapping per stream. Every
   * declared source needs one; `stream`, `shardCount` and `streamMode` do not apply.
   *
   * @default - none (a one-stream query reads `stream`)
   */
  readonly streams?: Readonly<Record<string, kinesis.IStream>>;

  /**
   * Shards of the stream the construct creates. Not allowed with `stream`, nor with an on-demand
   * `streamMode`.
   *
   * @default 1
   */
  readonly shardCount?: number;

  /**
   * Capacity mode of the stream the construct creates. An on-demand stream splits and merges its
   * shards by itself; stateful queries follow (a child shard starts from its parents' state, see
   * docs/architecture.md, Resharding). Its shard count is not known at synth, so a stateful query
   * runs in one stage only when its declared `source.partitionKey` is a state key, else with a
   * repartition stage. Not allowed with `stream` (a given stream has its own mode).
   *
   * @default kinesis.StreamMode.PROVISIONED
   */
  readonly streamMode?: kinesis.StreamMode;

  /**
   * Retention of the stream: set on a created stream; for a given `stream`, say what it has.
   * It sets the default `maxRecordAge`.
   *
   * @default Duration.hours(24) (Kinesis's default)
   */
  readonly streamRetention?: Duration;

  /**
   * Number of shards the stream has. With 1, any stateful query runs in one stage; with more (or
   * unknown), a stateful query whose state keys do not include its declared `source.partitionKey`
   * runs with a repartition stage (see `repartition`). Passed to the functions, which check it again.
   *
   * @default - `shardCount` for a created stream; unknown for a given `stream` (then a stateful
   * query is co-partitioned only through its declared partition key)
   */
  readonly expectedShardCount?: number;

  /**
   * Whether a stateful query whose state is not co-partitioned with the stream may run in two
   * stages through an internal Kinesis stream (stage 1 on the source shards routes rows by state
   * key; stage 2 on the internal shards keeps the state and writes the sink). With `false`, such a
   * query fails synth with the engine's STATE_NOT_CO_PARTITIONED error, as the runtime would refuse
   * it. A co-partitioned or stateless query never gets a stage, whatever this says.
   *
   * @default - automatic: a repartition stage exactly when the query needs one
   */
  readonly repartition?: boolean;

  /**
   * Shards of the internal repartition stream(s): the number of state partitions of stage 2. Only
   * used when the query has a repartition stage. May be changed on a deployed query: the stream is
   * updated in place (UpdateShardCount; at most double or half per deploy, Kinesis's limit) and
   * each new shard starts from its parents' state, join state included (docs/deploy.md, Shard count).
   *
   * @default - the source stream's shard count when known, else 2
   */
  readonly repartitionShardCount?: number;

  /**
   * Bucket of an `s3-files` or `s3-snapshot` sink, or of the values a `dynamodb` sink with
   * `onUnwritableRow: 'spill'` moves out of oversized items (its functions may only PutObject
   * there). Not allowed for another `dynamodb` sink.
   *
   * @default - a new bucket (S3-managed encryption, public access blocked, SSL enforced,
   * unversioned, `removalPolicy`)
   */
  readonly sinkBucket?: s3.IBucket;

  /**
   * Key prefix of an S3 sink; the functions may read and write only under it.
   *
   * @default - the definition's `sink.prefix`, else `<query name>/`
   */
  readonly sinkPrefix?: string;

  /**
   * A Glue Data Catalog table over an `s3-files` sink's location (columns from the result schema,
   * partition projection for `partitionBy`), for Athena; see cdk/lake-table.ts. `true` for defaults.
   *
   * @default - no table
   */
  readonly lakeTable?: boolean | LakeTableOptions;

  /**
   * Compaction of an `s3-files` sink: after each tick, the scheduled function merges each partition
   * folder's small per-batch files, once older than `minAge`, into files of up to `targetSize`,
   * within the time the invocation has left (the rest waits for the next tick). `false` leaves the
   * small files. Not allowed for other sinks.
   *
   * @default - on for an s3-files sink: files of up to 128 MiB, after one hour
   */
  readonly compaction?: SinkCompactionOptions | false;

  /**
   * Table of a `dynamodb` sink: partition key `pk` (string), no sort key. Not allowed for S3 sinks.
   *
   * @default - a new table (pk S, on-demand, point-in-time recovery, AWS-managed encryption,
   * `removalPolicy`)
   */
  readonly sinkTable?: dynamodb.ITable;

  /**
   * Tables a replay of this query writes (`sluice replay start --sink-table <name>`, docs/replay.md):
   * the functions that write the sink may PutItem them, as they may the sink table, and nothing
   * else. A replay of a `dynamodb` sink needs a table of its own; define it in the stack (partition
   * key `pk`, string) and list it here before the scheduled function drives the replay or before
   * the cutover. Only for a `dynamodb` sink (an S3 sink's replay writes under its own prefix, already
   * granted).
   *
   * @default - none
   */
  readonly replaySinkTables?: readonly dynamodb.ITable[];

  /**
   * Bucket for records that cannot be decoded (one object per record with its raw bytes, shard,
   * sequence number and reason). May be shared by several queries.
   *
   * @default - a new bucket, like the default sink bucket
   */
  readonly deadLetterBucket?: s3.IBucket;

  /**
   * Key prefix of the dead letters; objects go to `<prefix><query name>/<shard>/<sequence>.json`.
   *
   * @default 'dead-letter/'
   */
  readonly deadLetterPrefix?: string;

  /**
   * Bucket that receives the server access logs of the buckets this construct creates.
   *
   * @default - no access logging (acknowledged as AwsSolutions-S1)
   */
  readonly accessLogsBucket?: s3.IBucket;

  /**
   * Records per invocation (1 to 10000). One invocation is one micro-batch of one shard.
   *
   * @default 100
   */
  readonly batchSize?: number;

  /**
   * How long the event source mapping gathers records before invoking (0 to 300 seconds).
   *
   * @default Duration.seconds(1)
   */
  readonly maxBatchingWindow?: Duration;

  /**
   * Where a new event source mapping starts reading.
   *
   * @default lambda.StartingPosition.TRIM_HORIZON (the oldest record still in the stream)
   */
  readonly startingPosition?: lambda.StartingPosition;

  /**
   * With `StartingPosition.AT_TIMESTAMP`: the time, in seconds since the epoch.
   *
   * @default - none
   */
  readonly startingPositionTimestamp?: number;

  /**
   * Retries of a failing batch, -1 for unlimited. Sluice commits a shard's records in order and
   * answers each invocation with the first uncommitted record, so a retry resumes exactly there.
   * A batch that runs out of retries is skipped: its records never reach the query (their shard
   * and sequence range go to the on-failure queue). Unlimited retries keep the shard waiting
   * until the fault is fixed; `maxRecordAge` bounds the wait.
   *
   * @default -1 (unlimited)
   */
  readonly retryAttempts?: number;

  /**
   * Age after which a failing batch is given up (60 seconds to 7 days): its shard and sequence
   * range are sent to the on-failure queue (and alarmed on) while the records are still in the
   * stream, so they can be replayed. Without it a stuck shard's records would silently expire with
   * the stream's retention.
   *
   * @default - `streamRetention` minus one hour (23 hours for Kinesis's default 24-hour retention),
   * within 60 seconds to 7 days
   */
  readonly maxRecordAge?: Duration;

  /**
   * Split a batch in two and retry when the function errors (partial failures are reported with
   * batchItemFailures either way; this covers a function that crashes or times out).
   *
   * @default true
   */
  readonly bisectBatchOnError?: boolean;

  /**
   * Batches of one shard processed at once. Only 1 is supported: a shard is a state partition
   * with exactly one writer, and each batch's checkpoint and state follow the previous batch's.
   * To scale out, add shards (and declare the query's partition key, or let a repartition stage
   * route by the state key).
   *
   * @default 1
   */
  readonly parallelizationFactor?: number;

  /**
   * Memory of the functions, in MiB (also buys CPU). A sixteenth of it (16 to 64 MiB) sizes V8's
   * young generation (`--max-semi-space-size`): a group's state lives a few batches, and a young
   * generation that holds those batches lets it die young instead of filling the old generation
   * (Spark's GC tuning advice, for Node; measured in docs/architecture.md).
   *
   * @default 1024
   */
  readonly memorySize?: number;

  /**
   * Timeout of the functions.
   *
   * @default Duration.minutes(1)
   */
  readonly timeout?: Duration;

  /**
   * How often the scheduled function runs (no-data batches that close windows when input stops,
   * idle-shard checks). At least one minute.
   *
   * @default Duration.minutes(1)
   */
  readonly scheduleRate?: Duration;

  /**
   * A shard with no new records for this long, confirmed caught up, stops holding back the
   * query's watermark (its minimum over shards).
   *
   * @default Duration.minutes(5)
   */
  readonly idleShardTimeout?: Duration;

  /**
   * Retention of the functions' log groups.
   *
   * @default logs.RetentionDays.ONE_MONTH
   */
  readonly logRetention?: logs.RetentionDays;

  /**
   * At most one full state snapshot every this many batches (deltas in between): one is written
   * once the deltas since the last snapshot outweigh a new one in bytes.
   *
   * @default 20 (DEPLOYMENT_DEFAULTS.snapshotEveryBatches, the runtime's default)
   */
  readonly snapshotEveryBatches?: number;

  /**
   * What happens to the stateful resources this construct creates (streams, tables, buckets, queue,
   * log groups) when they leave the stack. A non-empty bucket is never deleted by CloudFormation.
   *
   * @default RemovalPolicy.RETAIN
   */
  readonly removalPolicy?: RemovalPolicy;

  /**
   * Alarm when the Kinesis-trigger function's iterator age (how far behind the stream it is) stays
   * above this for five minutes; the same for the repartition function on the internal stream.
   *
   * @default Duration.minutes(10)
   */
  readonly iteratorAgeAlarmThreshold?: Duration;

  /**
   * Action added to every alarm (e.g. an SNS topic action).
   *
   * @default - alarms without actions (see the `alarms` property)
   */
  readonly alarmAction?: cloudwatch.IAlarmAction;

  // ── Security and data protection ──────────────────────────────────────────────────────────

  /**
   * How long a dead letter is kept in the dead-letter bucket the construct creates: an S3
   * lifecycle rule on the dead-letter prefix expires the objects this long after they were
   * written. Dead letters hold the raw records, which may be personal data; read or copy them
   * within this time. With a given `deadLetterBucket`, only an explicit retention is applied: a
   * rule on this query's own prefix (`<deadLetterPrefix><query name>/`), added to a bucket of this
   * app; an imported bucket is refused (set its lifecycle yourself). Without one, a given
   * bucket's lifecycle is yours.
   *
   * @default Duration.days(30) on the bucket the construct creates
   */
  readonly deadLetterRetention?: Duration;

  /**
   * Customer-managed KMS key of the dead-letter bucket the construct creates (SSE-KMS with an S3
   * Bucket Key). The functions get kms:GenerateDataKey on it (dead letters are only written). A
   * given `deadLetterBucket` keeps its own encryption; its key, if any, is granted the same way.
   *
   * @default - S3-managed encryption (SSE-S3)
   */
  readonly deadLetterEncryptionKey?: kms.IKey;

  /**
   * Customer-managed KMS key of the sink the construct creates: the S3 sink bucket (SSE-KMS with
   * an S3 Bucket Key; kms:Decrypt and kms:GenerateDataKey for the functions that write the sink)
   * or the DynamoDB sink table.
   *
   * @default - S3-managed encryption for a bucket, the AWS-managed key for a table
   */
  readonly sinkEncryptionKey?: kms.IKey;

  /**
   * Customer-managed KMS key of the checkpoint and state tables (they hold the state, i.e. data
   * derived from the records).
   *
   * @default - the AWS-managed DynamoDB key
   */
  readonly stateEncryptionKey?: kms.IKey;

  /**
   * Customer-managed KMS key of the streams the construct creates: the source stream (when no
   * `stream` is given) and the internal repartition stream. Readers get kms:Decrypt, writers
   * kms:GenerateDataKey. A given `stream`'s own key, if any, is granted the same way.
   *
   * @default - the AWS-managed Kinesis key (alias/aws/kinesis)
   */
  readonly streamEncryptionKey?: kms.IKey;

  /**
   * DynamoDB deletion protection on the checkpoint and state tables: while on, the tables cannot
   * be deleted (by CloudFormation or anyone) until it is turned off. It guards the query's
   * position and state, whose loss means reprocessing or wrong answers. `removalPolicy` decides
   * what CloudFormation does when a table leaves the stack; with RETAIN (the default) the table
   * stays either way, with DESTROY the deletion fails while protection is on.
   *
   * @default - true, or false when `removalPolicy` is RemovalPolicy.DESTROY
   */
  readonly tableDeletionProtection?: boolean;

  /**
   * Reserved concurrency of each of the query's functions: caps them (and keeps that much of the
   * account's concurrency for them). The Kinesis-trigger function runs one invocation per shard
   * at a time, so give at least the shard count (and the internal shard count for the repartition
   * function), or shards wait for each other.
   *
   * @default - no reservation (the account's unreserved pool)
   */
  readonly reservedConcurrentExecutions?: number;

  /**
   * Debug logging (POWERTOOLS_LOG_LEVEL=DEBUG): logged errors then include the data values their
   * messages quote (a key too long for the sink, a parser's excerpt of a record). Without it the
   * logs hold codes, lengths and column names only; the records and full reasons are in the
   * dead-letter objects either way. For investigating a fault, not for normal running.
   *
   * @default false
   */
  readonly debugLogging?: boolean;

  /**
   * Map stack traces through the bundles' source maps (`NODE_OPTIONS=--enable-source-maps`). The
   * maps are deployed beside every bundle either way; reading them costs init time and memory, so
   * by default Node does not.
   *
   * @default false
   */
  readonly debugSourceMaps?: boolean;

  /**
   * A CloudWatch dashboard for the query: input and processing rate, batch duration, iterator
   * age, watermark and event-time lag, state rows per operator, late rows, dead letters, units and
   * estimated dollars per hour, and the alarms' states (each linking to its alarm).
   *
   * @default true
   */
  readonly dashboard?: boolean;

  /** @default - a name CloudFormation generates */
  readonly dashboardName?: string;

  /**
   * Prices the dashboard's dollars-per-hour widget multiplies the units by.
   *
   * @default DEFAULT_DASHBOARD_PRICES (us-east-1 on-demand list prices)
   */
  readonly dashboardPrices?: DashboardPrices;

  /**
   * AWS X-Ray tracing (active tracing on the functions, and Powertools Tracer in them): a segment
   * per invocation with a subsegment per shard batch run (annotated with query, shard and stage)
   * and the AWS SDK calls (DynamoDB, S3, Kinesis) under it. X-Ray is billed per trace.
   *
   * @default false
   */
  readonly tracing?: boolean;
}

/** The alarms, for adding actions or dashboards. */
export interface SluiceQueryAlarms {
  /** The Kinesis-trigger function is behind the stream (AWS/Lambda IteratorAge, maximum). */
  readonly iteratorAge: cloudwatch.Alarm;
  /** The Kinesis-trigger function failed (crashed, timed out, or refused its configuration). */
  readonly kinesisTriggerErrors: cloudwatch.Alarm;
  /** The scheduled function failed. */
  readonly scheduledTriggerErrors: cloudwatch.Alarm;
  /** Batches kept failing for 15 minutes (Sluice/FailedTriggers): a shard is stuck retrying. */
  readonly failedTriggers: cloudwatch.Alarm;
  /** Records that could not be decoded went to the dead-letter bucket (Sluice/DeadLetteredRecords). */
  readonly deadLetteredRecords: cloudwatch.Alarm;
  /** Rows arrived behind the watermark and were dropped (Sluice/RowsDroppedByWatermark). */
  readonly rowsDroppedByWatermark: cloudwatch.Alarm;
  /** A batch was given up after its retries or maximum age: records were skipped. */
  readonly skippedBatches: cloudwatch.Alarm;
  /** The repartition function is behind the internal stream (repartition stage only). */
  readonly repartitionIteratorAge?: cloudwatch.Alarm;
  /** The repartition function failed (repartition stage only). */
  readonly repartitionTriggerErrors?: cloudwatch.Alarm;
}

export class SluiceQuery extends Construct {
  /** The query, as the module's default export. */
  public readonly definition: QueryDefinition;
  /** The query's name: its checkpoint, state and metrics are keyed by it. */
  public readonly queryName: string;
  /** Absolute path of the query module. */
  public readonly queryModulePath: string;
  /** The project the functions are bundled from, and its lockfile. */
  public readonly project: ProjectPaths;
  public readonly stream: kinesis.IStream;
  /** A query over several streams: each source's stream, by source name (the first is also `stream`). */
  public readonly sourceStreams: Readonly<Record<string, kinesis.IStream>> | undefined;
  /** The event source mappings of the other source streams of a query over several (to the Kinesis-trigger function). */
  public readonly extraEventSources: readonly lambda.EventSourceMapping[] = [];
  /** Shards the query was validated for (undefined: unknown, a partition key is required). */
  public readonly expectedShardCount: number | undefined;
  public readonly checkpointTable: dynamodb.Table;
  public readonly stateTable: dynamodb.Table;
  /** The S3 sink's bucket (S3 sinks only). */
  public readonly sinkBucket: s3.IBucket | undefined;
  /** The S3 sink's key prefix (S3 sinks only). */
  public readonly sinkPrefix: string | undefined;
  /** The DynamoDB sink's table (DynamoDB sink only). */
  public readonly sinkTable: dynamodb.ITable | undefined;
  /** The Glue table over the s3-files sink (with `lakeTable` only); `grantRead` it to readers. */
  public readonly lakeTable: SluiceLakeTable | undefined;
  public readonly deadLetterBucket: s3.IBucket;
  public readonly deadLetterPrefix: string;
  /** Where the event source mappings send batches they give up (stream, shard and sequence range). */
  public readonly onFailureQueue: sqs.Queue;
  /** Consumes the on-failure queue: records each skipped range in the checkpoint table (lib/aws/on-failure-handler.ts). */
  public readonly onFailureFunction: nodejs.NodejsFunction;
  /** The source stream's function: the whole query, or stage 1 of a repartition stage. */
  public readonly kinesisTriggerFunction: nodejs.NodejsFunction;
  public readonly scheduledTriggerFunction: nodejs.NodejsFunction;
  /** The source stream's event source mapping (to the Kinesis-trigger function). */
  public readonly eventSource: lambda.EventSourceMapping;
  /** The query runs in two stages through an internal stream. */
  public readonly needsRepartition: boolean;
  /** The internal stream of the repartition stage (undefined without one). */
  public readonly repartitionStream: kinesis.Stream | undefined;
  /** The internal stream's function, stage 2: state and sink (undefined without a repartition stage). */
  public readonly repartitionFunction: nodejs.NodejsFunction | undefined;
  /** The internal stream's event source mapping (undefined without a repartition stage). */
  public readonly repartitionEventSource: lambda.EventSourceMapping | undefined;
  /** Chained stateful operators: the internal streams after the first (hop 2, 3, ...), one per later stage. */
  public readonly laterRepartitionStreams: kinesis.Stream[] = [];
  /** Their event source mappings, on the repartition function. */
  public laterRepartitionEventSources: readonly lambda.EventSourceMapping[] = [];
  public readonly scheduleRule: events.Rule;
  public readonly alarms: SluiceQueryAlarms;
  /** The query's dashboard (undefined with `dashboard: false`). */
  public readonly dashboard: cloudwatch.Dashboard | undefined;
  /** The functions' environment (RUNTIME_ENV variables). */
  public readonly environment: Readonly<Record<string, string>>;

  constructor(scope: Construct, id: string, props: SluiceQueryProps) {
    super(scope, id);
    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN;

    // ── The query: loaded and validated before any resource exists ──────────────────────────
    try {
      // Absolute, or relative to the current directory (where `cdk` runs).
      this.queryModulePath = resolveQueryModulePath(props.queryModule);
    } catch (error) {
      throw this.withContext(error, 'queryModule');
    }
    this.project = findProject(this.queryModulePath, props, (message) => this.propError(message));
    let loaded: ReturnType<typeof loadQueryModule>;
    try {
      loaded = loadQueryModule(this.queryModulePath, this.project.projectRoot);
    } catch (error) {
      throw this.withContext(error, 'queryModule');
    }
    this.definition = loaded.definition;
    this.queryName = String(this.definition.name);
    this.checkProps(props);

    this.sourceStreams = this.resolveSourceStreams(props);
    const { stream, expectedShardCount, streamRetention } = this.sourceStreams
      ? { stream: Object.values(this.sourceStreams)[0]!, expectedShardCount: props.expectedShardCount, streamRetention: props.streamRetention ?? Duration.hours(24) }
      : this.resolveStream(props, removalPolicy);
    this.stream = stream;
    this.expectedShardCount = expectedShardCount;
    const allowRepartition = props.repartition !== false;
    let hopCount = 0;
    let lakeShape: LakeTableShape | null = null;
    try {
      // The functions validate again at cold start, allowing a repartition stage exactly when
      // SLUICE_REPARTITION_STREAM is set: it is set below exactly when this says one is needed.
      const validated = loaded.validate({ expectedShardCount, allowRepartition });
      this.needsRepartition = validated.needsRepartition;
      const hopsOnMoreShards = expectedShardCount === 1 && validated.isStateful && !validated.needsRepartition ? hopsNeededOnMoreShards(loaded) : 0;
      if (hopsOnMoreShards > 0) this.warnOneShardState(props, hopsOnMoreShards === 1 && this.sourceStreams === undefined);
      hopCount = validated.repartition?.hops.length ?? validated.hop?.hops.length ?? 0;
      lakeShape = validated.lakeTable;
    } catch (error) {
      throw this.withContext(error, `query '${this.queryName}' (${this.queryModulePath})${allowRepartition ? '' : ' with repartition: false'}`);
    }

    // ── State, sink and dead letters ────────────────────────────────────────────────────────
    const protectTables = props.tableDeletionProtection ?? removalPolicy !== RemovalPolicy.DESTROY;
    this.checkpointTable = this.table('CheckpointTable', true, removalPolicy, props.stateEncryptionKey, protectTables, PROGRESS_RECORDS.ttlAttribute);
    this.stateTable = this.table('StateTable', true, removalPolicy, props.stateEncryptionKey, protectTables);
    const sink = this.definition.sink;
    if (sink.kind === 'dynamodb') {
      this.sinkTable = props.sinkTable ?? this.table('SinkTable', false, removalPolicy, props.sinkEncryptionKey);
      if (sink.onUnwritableRow === 'spill') {
        // Values moved out of oversized items; never expired: a live item may point to an old object.
        this.sinkBucket = props.sinkBucket ?? this.bucket('SinkBucket', props.accessLogsBucket, removalPolicy, props.sinkEncryptionKey);
        this.sinkPrefix = sinkPrefixFor(this.queryName, undefined, props.sinkPrefix);
      }
    } else {
      this.sinkBucket = props.sinkBucket ?? this.bucket('SinkBucket', props.accessLogsBucket, removalPolicy, props.sinkEncryptionKey);
      this.sinkPrefix = sinkPrefixFor(this.queryName, sink.prefix, props.sinkPrefix);
    }
    this.lakeTable = createLakeTable(this, props.lakeTable, lakeShape, this.queryName, this.sinkBucket, this.sinkPrefix, (m) => this.propError(m));
    this.deadLetterPrefix = props.deadLetterPrefix ?? DEPLOYMENT_DEFAULTS.deadLetterPrefix;
    this.deadLetterBucket = props.deadLetterBucket ?? this.bucket('DeadLetterBucket', props.accessLogsBucket, removalPolicy,
      props.deadLetterEncryptionKey, { prefix: this.deadLetterPrefix, expiration: props.deadLetterRetention ?? DEFAULT_DEAD_LETTER_RETENTION });
    if (props.deadLetterBucket && props.deadLetterRetention) this.expireDeadLettersIn(props.deadLetterBucket, props.deadLetterRetention);
    this.onFailureQueue = new sqs.Queue(this, 'OnFailureQueue', {
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
      // Lambda's SQS mapping needs at least the consumer's timeout; a few times it, so a retry waits.
      visibilityTimeout: Duration.seconds((props.timeout ?? Duration.minutes(1)).toSeconds() * 6),
      removalPolicy,
    });
    acknowledge(this.onFailureQueue, 'AwsSolutions-SQS3',
      'This queue is itself a dead-letter destination: the on-failure destination of the Kinesis event source mappings, '
      + 'holding the shard and sequence range of batches given up. The on-failure function records each in the checkpoint table; '
      + 'a message it cannot record stays (14 days) and is retried, and a waiting message is alarmed on.');

    // ── Repartition stage: the internal stream stage 1 routes rows to by state key ──────────
    if (this.needsRepartition) {
      this.repartitionStream = this.createStream('RepartitionStream', props.streamEncryptionKey, {
        streamMode: kinesis.StreamMode.PROVISIONED,
        shardCount: props.repartitionShardCount ?? expectedShardCount ?? DEFAULT_REPARTITION_SHARDS,
        retentionPeriod: REPARTITION_RETENTION,
        removalPolicy,
      });
      // Chained stateful operators: one more internal stream before each later stage.
      for (let hop = 2; hop <= hopCount; hop++) {
        this.laterRepartitionStreams.push(this.createStream(`RepartitionStream${hop}`, props.streamEncryptionKey, {
          streamMode: kinesis.StreamMode.PROVISIONED,
          shardCount: props.repartitionShardCount ?? expectedShardCount ?? DEFAULT_REPARTITION_SHARDS,
          retentionPeriod: REPARTITION_RETENTION,
          removalPolicy,
        }));
      }
    }

    // ── Functions ───────────────────────────────────────────────────────────────────────────
    const config: Partial<RuntimeConfig> = {
      checkpointTable: this.checkpointTable.tableName,
      stateTable: this.stateTable.tableName,
      sinkBucket: this.sinkBucket?.bucketName,
      sinkPrefix: this.sinkPrefix,
      sinkTable: this.sinkTable?.tableName,
      deadLetterBucket: this.deadLetterBucket.bucketName,
      deadLetterPrefix: this.deadLetterPrefix,
      streamName: this.stream.streamName,
      idleShardTimeoutMs: props.idleShardTimeout?.toMilliseconds() ?? DEPLOYMENT_DEFAULTS.idleShardTimeoutMs,
      expectedShardCount,
      snapshotEveryBatches: props.snapshotEveryBatches ?? DEPLOYMENT_DEFAULTS.snapshotEveryBatches,
      repartitionStreamName: this.repartitionStream?.streamName,
      ...(this.laterRepartitionStreams.length > 0
        ? { repartitionStreamNames: [this.repartitionStream!, ...this.laterRepartitionStreams].map((s) => s.streamName) }
        : {}),
      ...(this.sourceStreams ? { sourceStreams: Object.fromEntries(Object.entries(this.sourceStreams).map(([name, s]) => [name, s.streamName])) } : {}),
      ...compactionConfig(props.compaction, sink.kind, props.timeout ?? Duration.minutes(1), (m) => this.propError(m)),
      // The shortest retention the functions read from: a batch at risk of it keeps its records (an imported stream: 24 h unless told).
      streamRetentionHours: Math.min(streamRetention.toHours({ integral: false }), ...(this.repartitionStream ? [REPARTITION_RETENTION.toHours()] : [])),
    };
    this.environment = {
      ...runtimeConfigToEnv(config), NODE_OPTIONS: `${props.debugSourceMaps ? '--enable-source-maps ' : ''}--max-semi-space-size=${semiSpaceMb(props.memorySize ?? 1024)}`,
      ...(props.debugLogging ? { POWERTOOLS_LOG_LEVEL: 'DEBUG' } : {}),
      ...(props.tracing ? { [TRACING_ENV]: 'true', POWERTOOLS_SERVICE_NAME: METRIC_SERVICE_DIMENSION.value } : {}),
    };

    this.kinesisTriggerFunction = this.handlerFunction('KinesisTrigger', 'kinesis', props, removalPolicy,
      `Sluice query ${this.queryName}: one micro-batch per Kinesis shard batch`);
    this.scheduledTriggerFunction = this.handlerFunction('ScheduledTrigger', 'scheduled', props, removalPolicy,
      `Sluice query ${this.queryName}: scheduled no-data batches, idle shards, drain`);
    if (this.repartitionStream) {
      this.repartitionFunction = this.handlerFunction('RepartitionTrigger', 'repartition', props, removalPolicy,
        `Sluice query ${this.queryName}: ${hopCount > 1 ? `stages 2-${hopCount + 1}` : 'stage 2'} (state and sink) per internal repartition shard`);
    }
    this.grantAccess(loaded.validate({ expectedShardCount, allowRepartition }).isStateful, props.replaySinkTables ?? []);
    this.onFailureFunction = this.handlerFunction('OnFailure', 'on-failure', props, removalPolicy, `Sluice query ${this.queryName}: records the batches the event source mappings gave up (skipped ranges)`);
    // Only its own item collection of the checkpoint table: `${query}#skipped`.
    this.onFailureFunction.addToRolePolicy(new iam.PolicyStatement({
      actions: ['dynamodb:PutItem'],
      resources: [this.checkpointTable.tableArn],
      conditions: { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [`${this.queryName}${SKIPPED_RANGES_SUFFIX}`] } },
    }));
    if (props.stateEncryptionKey) props.stateEncryptionKey.grant(this.onFailureFunction, 'kms:Decrypt', 'kms:DescribeKey', 'kms:Encrypt', 'kms:GenerateDataKey');
    this.onFailureFunction.addEventSource(new SqsEventSource(this.onFailureQueue, { batchSize: 10, reportBatchItemFailures: true }));

    // ── Event sources ───────────────────────────────────────────────────────────────────────
    // The query's trigger, as Lambda can run it: processingTime → the batching window; availableNow → drain on the schedule.
    const trigger = deployedTrigger(this.definition.trigger);
    if (trigger.batchingWindowSeconds !== null && props.maxBatchingWindow !== undefined) {
      throw this.propError('maxBatchingWindow and the query\'s trigger processingTime both set the source mapping\'s batching window: set one.');
    }
    const sourceMappingOptions = {
      // availableNow: the mapping exists (its position is the stream's) but stays off; the schedule drains.
      ...(trigger.drain ? { enabled: false } : {}),
      startingPosition: props.startingPosition ?? lambda.StartingPosition.TRIM_HORIZON,
      startingPositionTimestamp: props.startingPositionTimestamp,
      batchSize: props.batchSize ?? 100,
      maxBatchingWindow: trigger.batchingWindowSeconds !== null ? Duration.seconds(trigger.batchingWindowSeconds) : props.maxBatchingWindow ?? Duration.seconds(1),
      retryAttempts: props.retryAttempts ?? -1,
      maxRecordAge: props.maxRecordAge ?? defaultMaxRecordAge(streamRetention),
      bisectBatchOnError: props.bisectBatchOnError ?? true,
      parallelizationFactor: 1,
      reportBatchItemFailures: true,
      onFailure: new SqsDlq(this.onFailureQueue),
    };
    this.eventSource = addKinesisEventSource(this.kinesisTriggerFunction, this.stream, sourceMappingOptions);
    // The other source streams feed the same function: the handler picks each record's stage by its stream.
    this.extraEventSources = Object.values(this.sourceStreams ?? {}).slice(1)
      .map((other) => addKinesisEventSource(this.kinesisTriggerFunction, other, sourceMappingOptions));
    if (this.repartitionStream && this.repartitionFunction) {
      checkSynthTimeDurationProp(props, 'maxRecordAge', 'the repartition stage caps it at its internal stream\'s retention',
        (message) => this.propError(message));
      const internalEventSource = (internal: kinesis.IStream): lambda.EventSourceMapping => addKinesisEventSource(this.repartitionFunction!, internal, {
        // Always from the oldest record: stage 1 may write before this mapping exists.
        startingPosition: lambda.StartingPosition.TRIM_HORIZON,
        batchSize: props.batchSize ?? 100,
        maxBatchingWindow: props.maxBatchingWindow ?? Duration.seconds(1),
        retryAttempts: props.retryAttempts ?? -1,
        maxRecordAge: Duration.seconds(Math.min(
          (props.maxRecordAge ?? defaultMaxRecordAge(REPARTITION_RETENTION)).toSeconds(),
          defaultMaxRecordAge(REPARTITION_RETENTION).toSeconds(),
        )),
        bisectBatchOnError: props.bisectBatchOnError ?? true,
        parallelizationFactor: 1,
        reportBatchItemFailures: true,
        onFailure: new SqsDlq(this.onFailureQueue),
      });
      this.repartitionEventSource = internalEventSource(this.repartitionStream);
      // One mapping per later hop on the same function: the stage is the one reading the record's stream.
      this.laterRepartitionEventSources = this.laterRepartitionStreams.map(internalEventSource);
    }

    this.scheduleRule = new events.Rule(this, 'Schedule', {
      description: `Sluice query ${this.queryName}: scheduled trigger`,
      schedule: events.Schedule.rate(props.scheduleRate ?? Duration.minutes(1)),
      targets: [new targets.LambdaFunction(this.scheduledTriggerFunction, {
        event: events.RuleTargetInput.fromObject({ mode: trigger.drain ? 'drain' : 'tick' }),
        // The next tick is the retry: a failed tick is not worth queueing behind it.
        retryAttempts: 0,
      })],
    });

    // ── What the sluice CLI reads to find this query's tables, streams and queue ─────────────
    const descriptor: DeploymentDescriptor = {
      ...config, sluiceQuery: this.queryName, checkpointTable: this.checkpointTable.tableName, stateTable: this.stateTable.tableName,
      streamName: this.stream.streamName, deadLetterBucket: this.deadLetterBucket.bucketName, onFailureQueueUrl: this.onFailureQueue.queueUrl,
    };
    new CfnOutput(this, 'SluiceDeployment', {
      description: `${DEPLOYMENT_OUTPUT_DESCRIPTION}${this.queryName}`,
      value: Stack.of(this).toJsonString(descriptor),
    });

    // ── Alarms ──────────────────────────────────────────────────────────────────────────────
    this.alarms = this.createAlarms(props);
    if (props.alarmAction) {
      for (const alarm of Object.values(this.alarms) as (cloudwatch.Alarm | undefined)[]) alarm?.addAlarmAction(props.alarmAction);
    }
    this.dashboard = props.dashboard === false ? undefined : createQueryDashboard(this, 'Dashboard', {
      queryName: this.queryName,
      metric: (name, options) => this.metric(name, options),
      dimensions: { [METRIC_SERVICE_DIMENSION.name]: METRIC_SERVICE_DIMENSION.value, [METRIC_DIMENSION_QUERY]: this.queryName },
      kinesisTrigger: this.kinesisTriggerFunction,
      repartitionTrigger: this.repartitionFunction,
      functions: this.functions().map((fn) => ({ fn, memoryMb: props.memorySize ?? 1024 })),
      onFailureQueue: this.onFailureQueue,
      alarms: (Object.values(this.alarms) as (cloudwatch.Alarm | undefined)[]).filter((a): a is cloudwatch.Alarm => a !== undefined),
      prices: props.dashboardPrices ?? DEFAULT_DASHBOARD_PRICES,
      dashboardName: props.dashboardName,
    });
  }

  /** The query's functions: the Kinesis-trigger function, the scheduled function, and the repartition function if any. */
  public functions(): nodejs.NodejsFunction[] {
    return [this.kinesisTriggerFunction, this.scheduledTriggerFunction, ...(this.repartitionFunction ? [this.repartitionFunction] : [])];
  }

  /** A metric the functions publish for this query (namespace Sluice, dimensions service + query). */
  public metric(metricName: string, options: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    return new cloudwatch.Metric({
      namespace: METRICS_NAMESPACE,
      metricName,
      dimensionsMap: { [METRIC_SERVICE_DIMENSION.name]: METRIC_SERVICE_DIMENSION.value, [METRIC_DIMENSION_QUERY]: this.queryName },
      statistic: cloudwatch.Stats.SUM,
      period: Duration.minutes(5),
      ...options,
    });
  }

  // ── Props ───────────────────────────────────────────────────────────────────────────────────

  private checkProps(props: SluiceQueryProps): void {
    const sink = this.definition.sink;
    if (props.parallelizationFactor !== undefined && props.parallelizationFactor !== 1) {
      throw this.propError(`parallelizationFactor ${props.parallelizationFactor} is not supported; only 1 is. `
        + 'Sluice keeps one state partition per Kinesis shard with exactly one writer: batch N+1 of a shard starts from the '
        + 'checkpoint and state that batch N committed, so two batches of one shard can never run at once. '
        + 'To scale out, add shards (shardCount, or UpdateShardCount on your stream) and declare the query\'s '
        + 'source.partitionKey so its state stays co-partitioned with them (or, when the state is keyed by other columns, '
        + 'let the repartition stage route rows by state key: repartitionShardCount sets its partitions).');
    }
    const integer = (name: keyof SluiceQueryProps, min: number, max?: number, synthTimeOnly?: string): void =>
      checkIntegerProp(props, name, min, max, synthTimeOnly, (message) => this.propError(message));
    integer('batchSize', 1, 10_000);
    // These decide the query's plan (stages, co-partitioning), which synth validates: known numbers only.
    integer('shardCount', 1, undefined, 'it sets the number of state partitions the query is validated for');
    integer('expectedShardCount', 1, undefined, 'synth validates the query for this many shards');
    integer('repartitionShardCount', 1, undefined, 'it sets the number of state partitions of the repartition stage');
    integer('snapshotEveryBatches', 1);
    integer('memorySize', 128, 10_240, 'it sizes V8\'s young generation (--max-semi-space-size in NODE_OPTIONS)');
    integer('reservedConcurrentExecutions', 1);
    const retention = props.deadLetterRetention;
    if (retention !== undefined && !retention.isUnresolved()) {
      const days = retention.toDays({ integral: false });
      if (!Number.isInteger(days) || days < 1) {
        throw this.propError(`deadLetterRetention must be a whole number of days, at least 1 (an S3 lifecycle expiration), got ${retention.toHumanString()}.`);
      }
    }
    const duration = (name: keyof SluiceQueryProps, why: string): void =>
      checkSynthTimeDurationProp(props, name, why, (message) => this.propError(message));
    if (props.maxRecordAge === undefined) {
      duration('streamRetention', 'the default maxRecordAge (streamRetention minus one hour) is computed from it; give maxRecordAge too');
    }
    duration('idleShardTimeout', 'the scheduled handler gets it in milliseconds');
    duration('iteratorAgeAlarmThreshold', 'the alarm threshold is written in milliseconds');
    if (props.streamMode !== undefined && props.stream) {
      throw this.propError('streamMode applies only to a stream the construct creates; a stream was given.');
    }
    if (props.shardCount !== undefined && props.stream) {
      throw this.propError(`shardCount (${props.shardCount}) applies only to a stream the construct creates; a stream was given.`);
    }
    if (props.repartitionShardCount !== undefined) {
      if (props.repartition === false) {
        throw this.propError(`repartitionShardCount (${props.repartitionShardCount}) sets the internal stream of a repartition stage, but repartition is false.`);
      }
    }
    if (props.startingPositionTimestamp !== undefined && props.startingPosition !== lambda.StartingPosition.AT_TIMESTAMP) {
      throw this.propError('startingPositionTimestamp needs startingPosition: StartingPosition.AT_TIMESTAMP.');
    }
    if (sink.kind === 'dynamodb') {
      if ((props.sinkBucket || props.sinkPrefix !== undefined) && sink.onUnwritableRow !== 'spill') {
        throw this.propError(`sinkBucket and sinkPrefix are for the s3-files and s3-snapshot sinks (and a dynamodb sink with onUnwritableRow: 'spill'); query '${this.queryName}' writes to a dynamodb sink (use sinkTable).`);
      }
      if (props.sinkTable && props.replaySinkTables?.includes(props.sinkTable)) {
        throw this.propError('replaySinkTables lists the sink table itself: a replay writes a table of its own, never the live one.');
      }
    } else {
      if (props.replaySinkTables && props.replaySinkTables.length > 0) {
        throw this.propError(`replaySinkTables are for a dynamodb sink's replays; query '${this.queryName}' writes to an ${sink.kind} sink, whose replay writes under its own sink prefix (already granted).`);
      }
      if (props.sinkTable) {
        throw this.propError(`sinkTable is for the dynamodb sink; query '${this.queryName}' writes to an ${sink.kind} sink (use sinkBucket and sinkPrefix).`);
      }
      if (props.sinkPrefix !== undefined && sink.prefix !== undefined && props.sinkPrefix !== sink.prefix) {
        throw this.propError(`sinkPrefix '${props.sinkPrefix}' differs from the query's sink.prefix '${sink.prefix}'; set one of them.`);
      }
    }
  }

  /** A query over several streams: a stream for every declared source, and no one-stream props. */
  private resolveSourceStreams(props: SluiceQueryProps): Readonly<Record<string, kinesis.IStream>> | undefined {
    if (!isMultiSource(this.definition)) {
      if (props.streams) {
        throw this.propError(`streams applies to a query over several streams (definition.sources); query '${this.queryName}' reads one stream: give stream instead.`);
      }
      return undefined;
    }
    const declared = Object.keys(this.definition.sources);
    const given = props.streams ?? {};
    const missing = declared.filter((name) => given[name] === undefined);
    if (missing.length > 0) {
      throw this.propError(`query '${this.queryName}' declares source${missing.length > 1 ? 's' : ''} ${missing.map((m) => `'${m}'`).join(', ')} with no stream: `
        + `give streams: { ${declared.map((name) => `${name}: <kinesis.IStream>`).join(', ')} }.`);
    }
    const unknown = Object.keys(given).filter((name) => !declared.includes(name));
    if (unknown.length > 0) throw this.propError(`streams names ${unknown.join(', ')}, which query '${this.queryName}' does not declare (its sources: ${declared.join(', ')}).`);
    for (const prop of ['stream', 'shardCount', 'streamMode'] as const) {
      if (props[prop] !== undefined) throw this.propError(`${prop} applies to a one-stream query; query '${this.queryName}' reads streams ${declared.join(', ')}: give them in streams.`);
    }
    return Object.fromEntries(declared.map((name) => [name, given[name]!]));
  }

  private resolveStream(props: SluiceQueryProps, removalPolicy: RemovalPolicy): {
    stream: kinesis.IStream; expectedShardCount: number | undefined; streamRetention: Duration;
  } {
    const streamRetention = props.streamRetention ?? Duration.hours(24);
    if (props.stream) return { stream: props.stream, expectedShardCount: props.expectedShardCount, streamRetention };
    if (props.streamMode === kinesis.StreamMode.ON_DEMAND) {
      if (props.shardCount !== undefined || props.expectedShardCount !== undefined) {
        throw this.propError('shardCount and expectedShardCount do not apply to an on-demand stream: Kinesis changes its shard count by itself.');
      }
      const onDemand = new kinesis.Stream(this, 'Stream', {
        streamMode: kinesis.StreamMode.ON_DEMAND,
        retentionPeriod: streamRetention,
        encryption: kinesis.StreamEncryption.MANAGED,
        removalPolicy,
      });
      return { stream: onDemand, expectedShardCount: undefined, streamRetention };
    }
    const shardCount = props.shardCount ?? 1;
    if (props.expectedShardCount !== undefined && props.expectedShardCount !== shardCount) {
      throw this.propError(`expectedShardCount (${props.expectedShardCount}) differs from the shardCount of the stream this construct creates (${shardCount}).`);
    }
    const stream = this.createStream('Stream', props.streamEncryptionKey, {
      streamMode: kinesis.StreamMode.PROVISIONED,
      shardCount,
      retentionPeriod: streamRetention,
      removalPolicy,
    });
    return { stream, expectedShardCount: shardCount, streamRetention };
  }

  // ── Resources ───────────────────────────────────────────────────────────────────────────────

  private createStream(id: string, encryptionKey: kms.IKey | undefined, props: kinesis.StreamProps): kinesis.Stream {
    const stream = new kinesis.Stream(this, id, {
      ...props,
      ...(encryptionKey ? { encryption: kinesis.StreamEncryption.KMS, encryptionKey } : { encryption: kinesis.StreamEncryption.MANAGED }),
    });
    if (encryptionKey) {
      acknowledge(stream, 'AwsSolutions-KDS3',
        'The customer-managed key was asked for through the streamEncryptionKey prop (a compliance choice that accepts '
        + 'the per-request KMS cost); without it the stream uses the AWS-managed aws/kinesis key.');
    }
    return stream;
  }

  private table(
    id: string, withSortKey: boolean, removalPolicy: RemovalPolicy, encryptionKey: kms.IKey | undefined, deletionProtection?: boolean,
    timeToLiveAttribute?: string,
  ): dynamodb.Table {
    return new dynamodb.Table(this, id, {
      ...(timeToLiveAttribute ? { timeToLiveAttribute } : {}),
      // The checkpoint and state tables have the same keys; the sink table only a partition key.
      partitionKey: { name: TABLE_KEYS.state.partitionKey, type: dynamodb.AttributeType.STRING },
      ...(withSortKey ? { sortKey: { name: TABLE_KEYS.state.sortKey, type: dynamodb.AttributeType.STRING } } : {}),
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      ...(encryptionKey
        ? { encryption: dynamodb.TableEncryption.CUSTOMER_MANAGED, encryptionKey }
        : { encryption: dynamodb.TableEncryption.AWS_MANAGED }),
      ...(deletionProtection !== undefined ? { deletionProtection } : {}),
      removalPolicy,
    });
  }

  /** A given bucket's rule for this query's dead letters only (other queries' prefixes keep their own). */
  private expireDeadLettersIn(bucket: s3.IBucket, expiration: Duration): void {
    if (!(bucket instanceof s3.Bucket)) {
      throw this.propError('deadLetterRetention cannot be applied to an imported deadLetterBucket (CDK cannot add a lifecycle rule to it): '
        + 'leave deadLetterRetention out and give the bucket a lifecycle rule where it is defined.');
    }
    bucket.addLifecycleRule({ id: `ExpireDeadLetters-${this.queryName}`, prefix: deadLetterObjectPrefix(this.deadLetterPrefix, this.queryName), expiration });
  }

  private bucket(
    id: string, accessLogsBucket: s3.IBucket | undefined, removalPolicy: RemovalPolicy, encryptionKey: kms.IKey | undefined,
    expire?: { prefix: string; expiration: Duration },
  ): s3.Bucket {
    const bucket = new s3.Bucket(this, id, {
      ...(encryptionKey
        ? { encryption: s3.BucketEncryption.KMS, encryptionKey, bucketKeyEnabled: true }
        : { encryption: s3.BucketEncryption.S3_MANAGED }),
      ...(expire ? { lifecycleRules: [{ id: 'ExpireDeadLetters', prefix: expire.prefix || undefined, expiration: expire.expiration }] } : {}),
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      versioned: false,
      removalPolicy,
      ...(accessLogsBucket ? { serverAccessLogsBucket: accessLogsBucket, serverAccessLogsPrefix: `${this.node.path}/${id}/` } : {}),
    });
    if (!accessLogsBucket) {
      acknowledge(bucket, 'AwsSolutions-S1',
        'Server access logging is opt-in through the accessLogsBucket prop: only the pipeline\'s own function roles '
        + 'read or write this bucket, and a log bucket of its own would need the same exemption.');
    }
    return bucket;
  }

  private handlerFunction(
    id: string, kind: HandlerKind, props: SluiceQueryProps, removalPolicy: RemovalPolicy, description: string,
  ): nodejs.NodejsFunction {
    const logGroup = new logs.LogGroup(this, `${id}Logs`, {
      retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy,
    });
    // An explicit role: no AWS-managed policy, and log writes only to this function's log group.
    const role = new iam.Role(this, `${id}Role`, {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `${description} (execution role)`,
    });
    logGroup.grantWrite(role);
    const fn = new nodejs.NodejsFunction(this, id, {
      entry: writeHandlerEntry(kind, this.queryModulePath,
        entriesDirFor(this.queryModulePath, this.project.projectRoot, Stage.of(this)?.outdir ?? 'cdk.out')),
      handler: 'handler',
      projectRoot: this.project.projectRoot,
      depsLockFilePath: this.project.depsLockFilePath,
      runtime: lambda.Runtime.NODEJS_22_X,
      architecture: lambda.Architecture.ARM_64,
      memorySize: props.memorySize ?? 1024,
      timeout: props.timeout ?? Duration.minutes(1),
      description: description.slice(0, 256),
      environment: { ...this.environment },
      role,
      logGroup,
      ...(props.reservedConcurrentExecutions !== undefined ? { reservedConcurrentExecutions: props.reservedConcurrentExecutions } : {}),
      ...(props.tracing ? { tracing: lambda.Tracing.ACTIVE } : {}),
      // Scheduled invocations are asynchronous; the next tick is the retry.
      ...(kind === 'scheduled' ? { retryAttempts: 0 } : {}),
      bundling: handlerBundling(this.definition.sink.kind),
    });
    if (props.tracing) {
      acknowledge(role, 'AwsSolutions-IAM5[Resource::*]',
        'X-Ray active tracing: xray:PutTraceSegments and xray:PutTelemetryRecords take no resource-level permissions '
        + '(the X-Ray service authorizes them only on *), as Lambda\'s own AWSXRayDaemonWriteAccess policy grants them.');
    }
    acknowledge(fn, 'AwsSolutions-L1',
      'Sluice is built and tested on Node.js 22 (nodejs22.x), the runtime the engine and its bundles target; '
      + 'moving to a newer runtime is a tested upgrade, not a synth-time default.');
    return fn;
  }

  /** Least privilege per function, from what each one's code calls (cdk/grants.ts). */
  private grantAccess(isStateful: boolean, replaySinkTables: readonly dynamodb.ITable[]): void {
    const resources: QueryResources = {
      checkpointTable: this.checkpointTable, stateTable: this.stateTable, sinkTable: this.sinkTable, replaySinkTables,
      sinkBucket: this.sinkBucket, sinkPrefix: this.sinkPrefix,
      deadLetterBucket: this.deadLetterBucket, deadLetterObjectPrefix: deadLetterObjectPrefix(this.deadLetterPrefix, this.queryName),
      stream: this.stream, repartitionStream: this.repartitionStream, laterRepartitionStreams: this.laterRepartitionStreams,
      otherSourceStreams: Object.values(this.sourceStreams ?? {}).slice(1),
    };
    const access = accessOf({ isStateful, needsRepartition: this.needsRepartition });
    grantFunctionAccess(this.kinesisTriggerFunction, access.kinesisTrigger, resources);
    grantFunctionAccess(this.scheduledTriggerFunction, access.scheduled, resources);
    if (this.repartitionFunction) grantFunctionAccess(this.repartitionFunction, access.repartition, resources);
  }

  private createAlarms(props: SluiceQueryProps): SluiceQueryAlarms {
    const fiveMinutes = Duration.minutes(5);
    const alarm = (id: string, metric: cloudwatch.IMetric, description: string, options: Partial<cloudwatch.CreateAlarmOptions> = {}): cloudwatch.Alarm =>
      new cloudwatch.Alarm(this, id, {
        metric,
        threshold: 1,
        evaluationPeriods: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        alarmDescription: `Sluice query ${this.queryName}: ${description}`,
        ...options,
      });
    const iteratorAgeThreshold = props.iteratorAgeAlarmThreshold ?? Duration.minutes(10);
    const repartition = this.repartitionFunction;
    return {
      iteratorAge: alarm('IteratorAgeAlarm',
        this.kinesisTriggerFunction.metric('IteratorAge', { statistic: cloudwatch.Stats.MAXIMUM, period: Duration.minutes(1) }),
        `the Kinesis trigger is more than ${iteratorAgeThreshold.toHumanString()} behind the stream. Look for FailedTriggers and errors in its logs; a healthy but slow query needs more shards or memory.`,
        { threshold: iteratorAgeThreshold.toMilliseconds(), evaluationPeriods: 5, comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD }),
      kinesisTriggerErrors: alarm('KinesisTriggerErrorsAlarm',
        this.kinesisTriggerFunction.metricErrors({ period: fiveMinutes, statistic: cloudwatch.Stats.SUM }),
        'the Kinesis-trigger function failed (crash, timeout, or a configuration/query it refuses at cold start). Records are retried; see its log group.'),
      scheduledTriggerErrors: alarm('ScheduledTriggerErrorsAlarm',
        this.scheduledTriggerFunction.metricErrors({ period: fiveMinutes, statistic: cloudwatch.Stats.SUM }),
        'the scheduled-trigger function failed; windows may not close while input is quiet. See its log group.'),
      failedTriggers: alarm('FailedTriggersAlarm', this.metric(METRIC.failedTriggers),
        'batches kept failing for 15 minutes: a shard is stuck retrying from its first uncommitted record. See the functions\' logs.',
        { evaluationPeriods: 3 }),
      deadLetteredRecords: alarm('DeadLetteredRecordsAlarm', this.metric(METRIC.deadLetteredRecords),
        'records that do not fit the source schema were written to the dead-letter bucket (raw bytes, shard, sequence number, reason).'),
      rowsDroppedByWatermark: alarm('RowsDroppedByWatermarkAlarm', this.metric(METRIC.rowsDroppedByWatermark),
        'rows arrived later than the watermark delay allows and were dropped; consider a longer withWatermark delay.'),
      skippedBatches: alarm('SkippedBatchesAlarm',
        new cloudwatch.MathExpression({
          // A skipped batch reaches the on-failure function (one invocation per delivery), or waits in the queue when it cannot be recorded.
          expression: 'recorded + waiting',
          usingMetrics: {
            recorded: this.onFailureFunction.metricInvocations({ period: fiveMinutes, statistic: cloudwatch.Stats.SUM }),
            waiting: this.onFailureQueue.metricApproximateNumberOfMessagesVisible({ period: fiveMinutes, statistic: cloudwatch.Stats.MAXIMUM }),
          },
          period: fiveMinutes,
        }),
        'an event source mapping gave up a batch (retries or maximum record age exhausted): its records were skipped. The on-failure function records the '
        + 'shard and sequence range in the checkpoint table; `sluice status` lists them and `sluice redrive --skipped` re-reads them while the stream still holds them.'),
      ...(repartition ? {
        repartitionIteratorAge: alarm('RepartitionIteratorAgeAlarm',
          repartition.metric('IteratorAge', { statistic: cloudwatch.Stats.MAXIMUM, period: Duration.minutes(1) }),
          `the repartition function (stage 2) is more than ${iteratorAgeThreshold.toHumanString()} behind the internal stream. Look for FailedTriggers and errors in its logs; a healthy but slow stage 2 needs more internal shards (a new deployment) or memory.`,
          { threshold: iteratorAgeThreshold.toMilliseconds(), evaluationPeriods: 5, comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD }),
        repartitionTriggerErrors: alarm('RepartitionTriggerErrorsAlarm',
          repartition.metricErrors({ period: fiveMinutes, statistic: cloudwatch.Stats.SUM }),
          'the repartition function (stage 2) failed (crash, timeout, or a configuration/query it refuses at cold start). Records of the internal stream are retried; see its log group.'),
      } : {}),
    };
  }

  /**
   * A one-shard stream, a state not keyed by the partition key, and later more shards: a new stage
   * layout. With one internal stream, the state moves to stage 2 at the split once the functions
   * are deployed for more shards (lib/checkpoint/stage-migration.ts); with more, the split children
   * are refused (RESHARD_STAGE_CHANGED). Said at the first deploy, while the choice is cheap.
   */
  private warnOneShardState(props: SluiceQueryProps, moves: boolean): void {
    const escape = props.stream
      ? 'leave expectedShardCount unset (the query then runs with a repartition stage from the start)'
      : 'give the construct a stream you create (`stream`, without expectedShardCount) or streamMode ON_DEMAND: the query then runs with a repartition stage from the start';
    const head = `query '${this.queryName}' runs in one stage only because its stream has one shard: its state is not keyed by the source's `
      + 'partitionKey, so it lives whole in that shard\'s partition. ';
    const body = moves
      ? 'Raising shardCount later adds a repartition stage, and at the split the state moves to it (the split children wait until the '
        + 'shard\'s last records are committed and its state has moved; records still on the old shard when the new functions arrive run '
        + 'through the one-stage plan in the scheduled function at its next tick). A split made outside '
        + 'a deploy is refused (RESHARD_WITH_STATE) until the functions are deployed for more shards. '
      : 'Raising shardCount (or splitting the stream) later gives the query more than one repartition stage, and the state cannot follow: '
        + 'the split children are refused (RESHARD_STAGE_CHANGED) and only a new query name (a new, empty state) runs it. ';
    Annotations.of(this).addWarningV2('sluice:one-shard-state',
      `${head}${body}To keep the option to add shards freely, declare a source.partitionKey among the state keys, or ${escape}.`);
  }

  // ── Errors ──────────────────────────────────────────────────────────────────────────────────

  private propError(message: string): Error {
    return new Error(`SluiceQuery ${this.node.path}: ${message}`);
  }

  /** The engine's error, unchanged in class, code and hint, with where it comes from in front. */
  private withContext(error: unknown, what: string): unknown {
    if (!(error instanceof Error)) return error;
    const original = error.message;
    // V8 formats `stack` on first access: read it before the message changes, then rewrite it.
    const stack = error.stack;
    error.message = `SluiceQuery ${this.node.path}: ${what}: ${original}`;
    if (stack?.includes(original)) error.stack = stack.replace(original, error.message);
    return error;
  }
}

function defaultMaxRecordAge(streamRetention: Duration): Duration {
  const seconds = Math.min(Math.max(streamRetention.toSeconds() - ONE_HOUR.toSeconds(), MIN_RECORD_AGE.toSeconds()), MAX_RECORD_AGE.toSeconds());
  return Duration.seconds(seconds);
}

/** V8's semi-space size for a function of `memoryMb`: a sixteenth, between 16 and 64 MiB. */
export function semiSpaceMb(memoryMb: number): number {
  return Math.max(16, Math.min(64, Math.floor(memoryMb / 16)));
}

/** How many internal streams the query would need on more shards (0: none, or it could not have them at all). */
function hopsNeededOnMoreShards(loaded: {
  validate(o: { expectedShardCount: number | undefined; allowRepartition: boolean }): { needsRepartition: boolean; repartition: { hops: readonly unknown[] } | null; hop: { hops: readonly unknown[] } | null };
}): number {
  try {
    const v = loaded.validate({ expectedShardCount: undefined, allowRepartition: true });
    if (!v.needsRepartition) return 0;
    // A query over several streams (a join's hop) counts as more than one: its state does not move.
    return v.repartition ? v.repartition.hops.length : Math.max(2, v.hop?.hops.length ?? 2);
  } catch {
    return 0;
  }
}
