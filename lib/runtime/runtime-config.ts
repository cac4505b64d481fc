/**
 * The deployment contract: the configuration the Lambda functions receive as environment variables
 * set by the CDK construct (or `sluice dev`), its defaults and the tables' key names. The construct
 * (cdk/) and the runtime both read them from here, so a default is written once.
 */
// zod/mini: the same validation as zod's chained API in a fraction of its load time, which every
// function pays at init (bench/bundles.bench.ts); the English messages are zod's own.
import * as z from 'zod/mini';
import { en } from 'zod/locales';
import { IllegalArgumentError } from '../errors/sluice-error.js';

export const RUNTIME_ENV = {
  checkpointTable: 'SLUICE_CHECKPOINT_TABLE',
  stateTable: 'SLUICE_STATE_TABLE',
  sinkBucket: 'SLUICE_SINK_BUCKET',
  sinkPrefix: 'SLUICE_SINK_PREFIX',
  sinkTable: 'SLUICE_SINK_TABLE',
  deadLetterBucket: 'SLUICE_DEAD_LETTER_BUCKET',
  deadLetterPrefix: 'SLUICE_DEAD_LETTER_PREFIX',
  deadLetterQueueUrl: 'SLUICE_DEAD_LETTER_QUEUE_URL',
  streamName: 'SLUICE_STREAM_NAME',
  idleShardTimeoutMs: 'SLUICE_IDLE_SHARD_TIMEOUT_MS',
  expectedShardCount: 'SLUICE_EXPECTED_SHARD_COUNT',
  snapshotEveryBatches: 'SLUICE_STATE_SNAPSHOT_EVERY',
  repartitionStreamName: 'SLUICE_REPARTITION_STREAM',
  repartitionStreamNames: 'SLUICE_REPARTITION_STREAMS',
  sourceStreams: 'SLUICE_SOURCE_STREAMS',
  compaction: 'SLUICE_COMPACTION',
  compactionTargetBytes: 'SLUICE_COMPACTION_TARGET_BYTES',
  compactionMinAgeMs: 'SLUICE_COMPACTION_MIN_AGE_MS',
  streamRetentionHours: 'SLUICE_STREAM_RETENTION_HOURS',
} as const;

/** 'true': the functions trace through Powertools Tracer (the construct's `tracing` prop, with X-Ray active tracing). */
export const TRACING_ENV = 'SLUICE_TRACING';

/** Defaults the construct deploys with and the runtime falls back to. */
export const DEPLOYMENT_DEFAULTS = {
  deadLetterPrefix: 'dead-letter/',
  /** A shard quiet this long, confirmed caught up, leaves the watermark minimum (5 minutes). */
  idleShardTimeoutMs: 300_000,
  /**
   * A full state snapshot at most every 20 batches, deltas in between: written once the deltas
   * since the last snapshot outweigh a new one (bytes), so a large, slowly changing state is not
   * rewritten every 20 batches.
   */
  snapshotEveryBatches: 20,
  /** The scheduled function merges an s3-files sink's small files into files of up to 128 MiB... */
  compactionTargetBytes: 128 * 1024 * 1024,
  /** ...once they are an hour old (longer than any function run that could still reveal a batch). */
  compactionMinAgeMs: 3_600_000,
} as const;

/**
 * Recent progress kept in the checkpoint table (items `progress#<batchId mod keep>` per state
 * partition, written with each commit), for `sluice status` and `sluice progress`. The ring bounds
 * them per partition; the TTL removes the rings of partitions that stopped (a resharded stream's
 * parents, a renamed query). The construct enables TTL on `ttlAttribute`.
 */
export const PROGRESS_RECORDS = {
  keep: 20,
  ttlAttribute: 'expiresAt',
  ttlSeconds: 7 * 24 * 3600,
} as const;

/**
 * The checkpoint table's item collection of the ranges the event source mappings skipped
 * (`${queryName}${SKIPPED_RANGES_SUFFIX}`): the only items the on-failure function writes.
 */
export const SKIPPED_RANGES_SUFFIX = '#skipped';

/** Key attribute names of the checkpoint, state and sink tables (all strings). */
export const TABLE_KEYS = {
  checkpoint: { partitionKey: 'pk', sortKey: 'sk' },
  state: { partitionKey: 'pk', sortKey: 'sk' },
  sink: { partitionKey: 'pk' },
} as const;

/** An S3 sink's key prefix: the deployment's, else the query's declared one, else `<query name>/`. */
export function sinkPrefixFor(queryName: string, declaredPrefix: string | undefined, deployedPrefix?: string): string {
  return deployedPrefix || (declaredPrefix ?? `${queryName}/`);
}

export interface RuntimeConfig {
  readonly checkpointTable: string;
  readonly stateTable: string;
  readonly sinkBucket?: string;
  readonly sinkPrefix: string;
  readonly sinkTable?: string;
  readonly deadLetterBucket: string;
  readonly deadLetterPrefix: string;
  readonly deadLetterQueueUrl?: string;
  readonly streamName: string;
  /** A shard with no new records for this long, confirmed caught up, leaves the watermark minimum. */
  readonly idleShardTimeoutMs: number;
  /** Known shard count (1 lets any stateful query run without a declared partition key). */
  readonly expectedShardCount?: number;
  /** At most one full state snapshot every N batches (deltas in between; see DEPLOYMENT_DEFAULTS). */
  readonly snapshotEveryBatches: number;
  /** The internal stream of the repartition stage, for queries whose state keys the stream is not partitioned by. */
  readonly repartitionStreamName?: string;
  /**
   * Every internal stream, hop 1 first (the first is `repartitionStreamName`), for a query with
   * chained stateful operators; unset: `repartitionStreamName` alone.
   */
  readonly repartitionStreamNames?: readonly string[];
  /** A query over several streams: each source name's Kinesis stream (JSON object in the environment). */
  readonly sourceStreams?: Readonly<Record<string, string>>;
  /** The function's memory in MB (Lambda's AWS_LAMBDA_FUNCTION_MEMORY_SIZE; unset off Lambda): a state that outgrows it fails loudly. */
  readonly functionMemoryMb?: number;
  /** Whether the scheduled function compacts an s3-files sink (default true; other sinks ignore it). */
  readonly compaction?: boolean;
  /** Compacted files grow up to this many bytes. */
  readonly compactionTargetBytes?: number;
  /** Only files older than this are compacted (must exceed the function timeout). */
  readonly compactionMinAgeMs?: number;
  /**
   * The shortest retention of the streams the functions read, in hours (may be fractional, for a
   * compressed local run): a batch whose records may expire before its attempt ends keeps them
   * first. Unset: 24, Kinesis's minimum, so an unknown retention is never overestimated.
   */
  readonly streamRetentionHours?: number;
}

z.config(en());

const nonEmpty = () => z.string().check(z.minLength(1));
const optional = z.optional(nonEmpty());
/** A whole number from the environment's text, at least `min`. */
const count = (min: 0 | 1) => z.pipe(z.coerce.number(), z.int().check(min === 0 ? z.nonnegative() : z.positive()));
const envShape = z.object({
  [RUNTIME_ENV.checkpointTable]: nonEmpty(),
  [RUNTIME_ENV.stateTable]: nonEmpty(),
  [RUNTIME_ENV.sinkBucket]: optional,
  [RUNTIME_ENV.sinkPrefix]: z._default(z.string(), ''),
  [RUNTIME_ENV.sinkTable]: optional,
  [RUNTIME_ENV.deadLetterBucket]: nonEmpty(),
  [RUNTIME_ENV.deadLetterPrefix]: z._default(z.string(), DEPLOYMENT_DEFAULTS.deadLetterPrefix),
  [RUNTIME_ENV.deadLetterQueueUrl]: optional,
  [RUNTIME_ENV.streamName]: nonEmpty(),
  [RUNTIME_ENV.idleShardTimeoutMs]: z._default(count(0), DEPLOYMENT_DEFAULTS.idleShardTimeoutMs),
  [RUNTIME_ENV.expectedShardCount]: z.optional(count(1)),
  [RUNTIME_ENV.snapshotEveryBatches]: z._default(count(1), DEPLOYMENT_DEFAULTS.snapshotEveryBatches),
  [RUNTIME_ENV.repartitionStreamName]: optional,
  [RUNTIME_ENV.repartitionStreamNames]: optional,
  [RUNTIME_ENV.sourceStreams]: z.pipe(z.optional(z.string()), z.transform((text, ctx) => {
    if (text === undefined || text === '') return undefined;
    try {
      const parsed: unknown = JSON.parse(text);
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed) && Object.values(parsed).every((v) => typeof v === 'string' && v.length > 0)) {
        return parsed as Record<string, string>;
      }
    } catch {
      // reported below
    }
    ctx.issues.push({ code: 'custom', message: 'a JSON object of source name to stream name', input: text });
    return z.NEVER;
  })),
  [RUNTIME_ENV.compaction]: z._default(z.enum(['true', 'false']), 'true'),
  [RUNTIME_ENV.compactionTargetBytes]: z._default(count(1), DEPLOYMENT_DEFAULTS.compactionTargetBytes),
  [RUNTIME_ENV.compactionMinAgeMs]: z._default(count(0), DEPLOYMENT_DEFAULTS.compactionMinAgeMs),
  [RUNTIME_ENV.streamRetentionHours]: z.optional(z.pipe(z.coerce.number(), z.number().check(z.positive()))),
});

export function readRuntimeConfig(env: Readonly<Record<string, string | undefined>> = process.env): RuntimeConfig {
  const parsed = envShape.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${String(i.path[0])}: ${i.message}`).join('; ');
    throw new IllegalArgumentError(`Invalid Sluice function configuration: ${problems}`, {
      code: 'INVALID_RUNTIME_CONFIG',
      hint: 'these variables are set by the SluiceQuery CDK construct; check the function\'s environment.',
    });
  }
  const e = parsed.data;
  return {
    checkpointTable: e[RUNTIME_ENV.checkpointTable],
    stateTable: e[RUNTIME_ENV.stateTable],
    sinkBucket: e[RUNTIME_ENV.sinkBucket],
    sinkPrefix: e[RUNTIME_ENV.sinkPrefix],
    sinkTable: e[RUNTIME_ENV.sinkTable],
    deadLetterBucket: e[RUNTIME_ENV.deadLetterBucket],
    deadLetterPrefix: e[RUNTIME_ENV.deadLetterPrefix],
    deadLetterQueueUrl: e[RUNTIME_ENV.deadLetterQueueUrl],
    streamName: e[RUNTIME_ENV.streamName],
    idleShardTimeoutMs: e[RUNTIME_ENV.idleShardTimeoutMs],
    expectedShardCount: e[RUNTIME_ENV.expectedShardCount],
    snapshotEveryBatches: e[RUNTIME_ENV.snapshotEveryBatches],
    repartitionStreamName: e[RUNTIME_ENV.repartitionStreamName],
    ...(e[RUNTIME_ENV.repartitionStreamNames] ? { repartitionStreamNames: e[RUNTIME_ENV.repartitionStreamNames]!.split(',') } : {}),
    sourceStreams: e[RUNTIME_ENV.sourceStreams],
    compaction: e[RUNTIME_ENV.compaction] === 'true',
    compactionTargetBytes: e[RUNTIME_ENV.compactionTargetBytes],
    compactionMinAgeMs: e[RUNTIME_ENV.compactionMinAgeMs],
    ...(e[RUNTIME_ENV.streamRetentionHours] !== undefined ? { streamRetentionHours: e[RUNTIME_ENV.streamRetentionHours] } : {}),
    // Set by Lambda itself, not by the construct: not in RUNTIME_ENV.
    functionMemoryMb: Number(env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE) > 0 ? Number(env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE) : undefined,
  };
}

/**
 * How the `sluice` CLI finds a deployed query: the construct writes one CloudFormation output per
 * query whose value is this JSON (the functions' configuration plus the on-failure queue), and
 * whose description starts with `DEPLOYMENT_OUTPUT_DESCRIPTION`. `sluice dev` and tests write the
 * same JSON to a file (`--deployment file.json`).
 */
export interface DeploymentDescriptor extends Partial<RuntimeConfig> {
  readonly sluiceQuery: string;
  readonly checkpointTable: string;
  readonly stateTable: string;
  readonly streamName: string;
  readonly deadLetterBucket: string;
  readonly onFailureQueueUrl?: string;
  readonly stack?: string;
  /**
   * The namespace its checkpoint and state live in now, when a replay was cut over to
   * (lib/aws/query-namespace.ts); the CLI reads it from the checkpoint table, never the construct.
   */
  readonly activeNamespace?: string;
}

export const DEPLOYMENT_OUTPUT_DESCRIPTION = 'Sluice query deployment (read by the sluice CLI): ';

/** The inverse, for the CDK construct and `sluice dev`: config → environment variables. */
export function runtimeConfigToEnv(config: Partial<RuntimeConfig>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [field, variable] of Object.entries(RUNTIME_ENV)) {
    const value = (config as Record<string, unknown>)[field];
    if (value !== undefined) env[variable] = Array.isArray(value) ? value.join(',') : typeof value === 'object' ? JSON.stringify(value) : String(value);
  }
  return env;
}

/**
 * The Kinesis stream of a query's source: `sourceStreams[name]`, else (a one-stream query) the
 * deployment's stream. A declared source without a stream is a deployment error, said at cold start.
 */
export function streamNameOf(config: RuntimeConfig, sourceName: string, multiSource: boolean): string {
  const mapped = config.sourceStreams?.[sourceName];
  if (mapped) return mapped;
  if (!multiSource) return config.streamName;
  throw new IllegalArgumentError(`${RUNTIME_ENV.sourceStreams} names no stream for source '${sourceName}' of the query.`, {
    code: 'INVALID_RUNTIME_CONFIG',
    hint: 'give the SluiceQuery construct a stream for every source (props.streams), or set the variable to {"<source>": "<stream name>", ...}.',
  });
}
