/**
 * Wires the AWS adapters into the engine's backend interfaces for one deployed query: the
 * DynamoDB checkpoint and state of each state partition (shard), the sink its definition names,
 * the S3 dead-letter location, the cross-shard watermark coordinator and the shard reader.
 */
import type { QueryDefinition } from '../query/query-definition.js';
import type { CompiledQuery } from '../query/compiled-query.js';
import type { ExpiredPlannedRecords, PartitionBackends } from '../query/partition-backends.js';
import { SkippedBatchStore } from './skipped-batches.js';
import { DynamoDbKeptRecords } from './kept-records.js';
import { withSenderRecords, type SenderLog } from './expired-internal-records.js';
import type { LostSourceBatches } from '../sources/repartition-shard-source.js';
import type { QueryStage } from '../query/query-stage.js';
import type { CostMeter } from '../core/cost-meter.js';
import { sinkPrefixFor, streamNameOf, type RuntimeConfig } from '../runtime/runtime-config.js';
import { isMultiSource } from '../query/query-definition.js';
import type { Sink } from '../sinks/sink.js';
import { IllegalArgumentError } from '../errors/sluice-error.js';
import type { AwsClients } from './clients.js';
import { s3Sdk } from './s3-sdk.js';
import { DynamoDbCheckpoint } from './dynamodb-checkpoint.js';
import { DynamoDbUpsertSink } from './dynamodb-upsert-sink.js';
import type { SpillLocation } from './dynamodb-spill.js';
import { DynamoDbWatermarkCoordinator } from './dynamodb-watermarks.js';
import { KinesisShardReader, listStreamShards } from './kinesis-shard-reader.js';
import type { SourceShard } from '../sources/repartition-records.js';
import { S3DeadLetterWriter } from './s3-dead-letter-writer.js';
import { DynamoDbRedriveLedger, redrivePlanCondition } from './redrive-batch.js';
import { S3FilesSink } from './s3-files-sink.js';
import { S3SnapshotSink } from './s3-snapshot-sink.js';
import { KinesisRepartitionChannel } from './kinesis-repartition-channel.js';
import { internalStreamNames } from '../query/compiled-query.js';
import { RepartitionSink } from '../sinks/repartition-sink.js';
import type { HashKeyRange } from '../state/state-routing.js';
import type { TransactWriteItem } from '@aws-sdk/client-dynamodb';
import type { NamespaceLocation } from './query-namespace.js';

/**
 * The namespace the backends keep checkpoint, state and watermarks in (lib/aws/query-namespace.ts),
 * where its sink writes, and the fence its commits carry; default: the query's own name, the
 * deployment's sink, no fence.
 */
export interface BackendsNamespace {
  readonly location: NamespaceLocation;
  readonly fence?: TransactWriteItem;
}

export interface AwsQueryBackends {
  readonly watermarks: DynamoDbWatermarkCoordinator;
  readonly shardReader: KinesisShardReader;
  readonly sink: Sink;
  /** Stage 1's sink (hop 1), when the query has a repartition stage. */
  readonly repartitionSink: RepartitionSink | null;
  /** Reads the first internal stream's shards (stage 2), when the query has a repartition stage. */
  readonly repartitionShardReader: KinesisShardReader | null;
  /** The stream whose shards run `stage`: its source stream, or the internal stream it reads. */
  streamOf(stage: QueryStage): string;
  /** The reader of that stream. */
  readerOf(stage: QueryStage): KinesisShardReader;
  /** The sink of a stage that writes to an internal stream (null for a stage writing the query's sink). */
  repartitionSinkOf(stage: QueryStage): RepartitionSink | null;
  /**
   * One state partition's backends (default: of the query's source stage); the stage names its
   * checkpoint partition and says which stream it reads and where it writes.
   */
  forPartition(shardId: string, stage?: QueryStage): PartitionBackends;
}

export function sinkPrefixOf(definition: QueryDefinition, config: RuntimeConfig): string {
  return sinkPrefixFor(definition.name, definition.sink.kind === 'dynamodb' ? undefined : definition.sink.prefix, config.sinkPrefix);
}

export function createAwsQueryBackends(
  query: CompiledQuery,
  config: RuntimeConfig,
  clients: AwsClients,
  meter: CostMeter,
  decorateSink: (sink: Sink) => Sink = (sink) => sink,
  namespace: BackendsNamespace = { location: { namespace: query.definition.name } },
): AwsQueryBackends {
  const { definition } = query;
  // State objects live under the deployment's own prefix (their keys name the namespace), where a
  // reader given the deployment looks for them.
  const stateObjectPrefix = sinkPrefixOf(definition, config);
  config = namespacedConfig(definition, config, namespace.location);
  const stateNamespace = namespace.location.namespace;
  // A replay shares the internal streams with the live run: its records carry its namespace.
  const channelNamespace = stateNamespace === definition.name ? undefined : stateNamespace;
  const resultSink = createSink(definition, query.keyColumns, config, clients, meter, (partitionId) => ancestorsOf(partitionId));
  const sink = decorateSink(resultSink);
  // An S3 sink's bucket also takes state payloads that cost less as one object than as items.
  const stateObjects = definition.sink.kind !== 'dynamodb' && config.sinkBucket
    ? { client: clients.s3, bucket: config.sinkBucket, prefix: stateObjectPrefix }
    : undefined;
  const deadLetters = new S3DeadLetterWriter({
    client: clients.s3, bucket: config.deadLetterBucket, prefix: config.deadLetterPrefix, meter,
  });
  const watermarks = new DynamoDbWatermarkCoordinator({
    client: clients.dynamodb, checkpointTable: config.checkpointTable, queryName: stateNamespace,
    idleTimeoutMs: config.idleShardTimeoutMs, meter,
  });
  const multiSource = isMultiSource(definition);
  // Planned records lost to retention are recorded beside the skipped ranges, where status lists them.
  const expiredRanges = new SkippedBatchStore({ client: clients.dynamodb, checkpointTable: config.checkpointTable, queryName: stateNamespace });
  const hops = query.hops;
  const streams = internalStreamNames(config);
  if (hops.length > 0 && streams.length < hops.length) {
    throw missing('SLUICE_REPARTITION_STREAMS', `${hops.length} internal repartition stream(s), one per hop`);
  }
  const sourceStreamOf = (sourceName: string): string => streamNameOf(config, sourceName, multiSource);
  const streamOf = (stage: QueryStage): string => (stage.inputHop
    ? streams[stage.inputHop.index]!
    : sourceStreamOf(stage.sourceName ?? query.sourceStage.sourceName!));
  // Every stream is named at cold start: a missing one fails before any record is touched.
  const sourceReaders = new Map(query.sourceStages.map((stage) => [stage.sourceName!, new KinesisShardReader(clients.kinesis, streamOf(stage), meter)]));
  const shardReader = sourceReaders.get(query.sourceStage.sourceName!)!;
  // One channel and one reader per hop: stage k writes hop k, stage k + 1 reads it.
  const channels = hops.map((hop) => new KinesisRepartitionChannel(clients.kinesis, streams[hop.index]!, meter));
  const hopReaders = hops.map((hop) => new KinesisShardReader(clients.kinesis, streams[hop.index]!, meter));
  const readerOf = (stage: QueryStage): KinesisShardReader => (stage.inputHop
    ? hopReaders[stage.inputHop.index]!
    : sourceReaders.get(stage.sourceName ?? '') ?? shardReader);
  // One sink per writing stage: the inputs of a multi-input hop share its stream, each tagging its rows.
  const repartitionSinks = new Map<QueryStage, RepartitionSink>();
  const repartitionSinkOf = (stage: QueryStage): RepartitionSink | null => {
    const hop = stage.outputHop;
    if (!hop) return null;
    let found = repartitionSinks.get(stage);
    if (!found) {
      found = RepartitionSink.forHop(hop, channels[hop.index]!, meter, stage.hopInput, channelNamespace);
      repartitionSinks.set(stage, found);
    }
    return found;
  };
  const shardLists = new Map<string, { at: number; shards: SourceShard[] }>();
  // With their parents: a child of a reshard carries its parents' event time (the next stage's watermark).
  const shardsOf = async (streamName: string): Promise<SourceShard[]> => {
    const cached = shardLists.get(streamName);
    if (cached && Date.now() - cached.at <= 30_000) return cached.shards;
    const shards = (await listStreamShards(clients.kinesis, streamName)).map((s) => ({
      id: s.ShardId!, parents: [s.ParentShardId, s.AdjacentParentShardId].filter((p): p is string => typeof p === 'string' && p !== ''),
    }));
    shardLists.set(streamName, { at: Date.now(), shards });
    return shards;
  };
  // A shard's hash-key range never changes: listed once per stream per container, for initial states.
  const rangeLists = new Map<string, Promise<Map<string, HashKeyRange>>>();
  const rangeOf = async (streamName: string, shardId: string): Promise<HashKeyRange> => {
    let ranges = rangeLists.get(streamName);
    if (!ranges || !(await ranges).has(shardId)) {
      ranges = listStreamShards(clients.kinesis, streamName).then((shards) => new Map(shards.map((s) => [s.ShardId!, {
        start: BigInt(s.HashKeyRange!.StartingHashKey!), end: BigInt(s.HashKeyRange!.EndingHashKey!),
      }]))).catch((error: unknown) => { rangeLists.delete(streamName); throw error; });
      rangeLists.set(streamName, ranges);
    }
    const range = (await ranges).get(shardId);
    if (!range) throw new Error(`shard ${shardId} is not a shard of stream ${streamName}`);
    return range;
  };
  // The sink stage's partitions after reshards (the snapshot sink's lineage): listed afresh, since
  // it is asked once per partition, at its first publish, when a cached list may predate the reshard.
  const sinkStage = query.stages.find((s) => s.writes === 'sink') ?? query.sourceStage;
  const ancestorsOf = async (partitionId: string): Promise<string[]> => {
    const shards = await listStreamShards(clients.kinesis, streamOf(sinkStage));
    const byId = new Map(shards.map((s) => [s.ShardId!, s]));
    const own = shards.find((s) => sinkStage.partitionId(s.ShardId!) === partitionId);
    if (!own) throw new Error(`partition ${partitionId} is not a shard of stream ${streamOf(sinkStage)}`);
    const ancestors: string[] = [];
    const visit = (shardId: string | undefined): void => {
      if (!shardId || ancestors.includes(sinkStage.partitionId(shardId))) return;
      ancestors.push(sinkStage.partitionId(shardId));
      const shard = byId.get(shardId);
      if (shard) for (const parent of [shard.ParentShardId, shard.AdjacentParentShardId]) visit(parent);
    };
    for (const parent of [own.ParentShardId, own.AdjacentParentShardId]) visit(parent);
    return ancestors;
  };
  /** The offset log of the partition that sent a stage's lost rows (`src`: its partition id). */
  const senderLogOf = (stage: QueryStage, lost: LostSourceBatches): SenderLog | null => {
    const sender = query.stages.find((s) => s.outputHop?.index === stage.inputHop?.index && s.hopInput === lost.input);
    if (!sender) return null;
    // A source stage's partition id is its checkpoint partition; a later stage's is the shard id.
    const partitionId = sender.reads === 'source-stream' ? lost.src : sender.checkpointPartition(lost.src);
    return {
      streamName: streamOf(sender), sourceName: sender.sourceId,
      checkpoint: new DynamoDbCheckpoint({ client: clients.dynamodb, checkpointTable: config.checkpointTable, stateTable: config.stateTable, queryName: stateNamespace, partitionId, meter }),
    };
  };
  // A source shard's pending re-drive batch reads its records here (lib/aws/redrive-batch.ts).
  const redriveLedger = new DynamoDbRedriveLedger(clients.dynamodb, config.checkpointTable, definition.name, meter);
  return {
    watermarks,
    shardReader,
    sink,
    repartitionSink: repartitionSinkOf(query.sourceStage),
    repartitionShardReader: hopReaders[0] ?? null,
    streamOf,
    readerOf,
    repartitionSinkOf,
    forPartition: (shardId, stage = query.sourceStage) => {
      const input = stage.inputHop;
      const toHop = repartitionSinkOf(stage);
      // The senders of a stage's input: the source stream(s)' shards (by source name when a hop has
      // several inputs), or the shards of the hop before.
      const sendersOf = (sourceName?: string): string => (input!.index === 0
        ? (sourceName === undefined ? streamOf(query.sourceStage) : sourceStreamOf(sourceName))
        : streams[input!.index - 1]!);
      return {
        checkpoint: new DynamoDbCheckpoint({
          client: clients.dynamodb, checkpointTable: config.checkpointTable, stateTable: config.stateTable,
          queryName: stateNamespace, partitionId: stage.checkpointPartition(shardId), meter,
          snapshotEvery: config.snapshotEveryBatches, snapshotByBytes: true,
          ...(stateObjects ? { stateObjects } : {}),
          ...(namespace.fence ? { commitFence: namespace.fence } : {}),
          ...(input ? {} : {
            planCondition: redrivePlanCondition(config.checkpointTable, definition.name),
            // The reshard guard marks the row closed before seeding the children: no re-drive batch lands after.
            planFence: watermarks.notClosedCheck(stage.partitionId(shardId)),
          }),
        }),
        sink: toHop ?? sink,
        ...(toHop ? {} : { sinkRowLimits: resultSink.rowLimits }),
        deadLetters,
        watermarks,
        shardReader: readerOf(stage),
        ...(input ? {} : { redriveLedger }),
        recordExpiredRecords: async (loss: ExpiredPlannedRecords) => {
          // Stage 2: what the lost internal records carried, down to the records their senders read.
          const lostSources = loss.lostSources && await withSenderRecords(loss.lostSources, (lost) => senderLogOf(stage, lost));
          return expiredRanges.recordExpiredPlanned(stage.checkpointPartition(shardId), streamOf(stage), { ...loss, ...(lostSources ? { lostSources } : {}) });
        },
        expiredRecordsCommitWrite: (loss: ExpiredPlannedRecords) => expiredRanges.expiredCommitWrite(stage.checkpointPartition(shardId), loss),
        // A batch at risk of retention keeps its records beside its loss record's item (lib/aws/kept-records.ts).
        keptRecords: new DynamoDbKeptRecords({
          client: clients.dynamodb, checkpointTable: config.checkpointTable, queryName: stateNamespace, partitionId: stage.checkpointPartition(shardId), meter,
        }),
        ...(config.streamRetentionHours !== undefined ? { keepPolicy: { retentionMs: config.streamRetentionHours * 3_600_000 } } : {}),
        costMeter: meter,
        ...(input ? { sourcePartitions: (sourceName?: string) => shardsOf(sendersOf(sourceName)) } : {}),
        stateKeyRange: () => rangeOf(streamOf(stage), shardId),
        ...(channelNamespace === undefined ? {} : { channelNamespace }),
      };
    },
  };
}

/**
 * The configuration a namespace's backends run with: its sink location in place of the
 * deployment's. A replay of a DynamoDB-sink query must name its own table: writing the live table
 * would change the live answer before the cutover.
 */
export function namespacedConfig(definition: QueryDefinition, config: RuntimeConfig, location: NamespaceLocation): RuntimeConfig {
  if (location.namespace !== definition.name && definition.sink.kind === 'dynamodb' && !location.sinkTable) {
    throw new IllegalArgumentError(`The namespace ${location.namespace} of query '${definition.name}' has no sink table of its own.`, {
      code: 'INVALID_RUNTIME_CONFIG', hint: 'start the replay with --sink-table <a table for the replayed answer>.',
    });
  }
  return {
    ...config,
    ...(location.sinkPrefix ? { sinkPrefix: location.sinkPrefix } : {}),
    ...(location.sinkTable ? { sinkTable: location.sinkTable } : {}),
  };
}

/**
 * The sink kind the function was bundled for: the construct's bundler defines it (cdk/bundling.ts),
 * so the other sinks' branches below are dead code and their modules stay out of the bundle.
 * Unbundled (tests, `sluice dev`, `sluice/lambda` wired by hand) it is undefined: every sink.
 */
declare const SLUICE_BUNDLED_SINK: string | undefined;

function createSink(
  definition: QueryDefinition, keyColumns: readonly string[], config: RuntimeConfig, clients: AwsClients, meter: CostMeter,
  ancestorsOf: (partitionId: string) => Promise<readonly string[]>,
): Sink {
  const spec = definition.sink;
  // The bundled kind is tested first, so that a defined one folds the condition to a constant.
  if ((typeof SLUICE_BUNDLED_SINK === 'undefined' || SLUICE_BUNDLED_SINK === 'dynamodb') && spec.kind === 'dynamodb') {
    if (!config.sinkTable) throw missing('SLUICE_SINK_TABLE', 'the DynamoDB sink table');
    let spill: SpillLocation | undefined;
    if (spec.onUnwritableRow === 'spill') {
      if (!config.sinkBucket) throw missing('SLUICE_SINK_BUCKET', "a bucket for the values onUnwritableRow: 'spill' moves out of oversized items");
      spill = { client: clients.s3, bucket: config.sinkBucket, prefix: sinkPrefixFor(definition.name, undefined, config.sinkPrefix) };
    }
    return new DynamoDbUpsertSink({ client: clients.dynamodb, tableName: config.sinkTable, keyColumns, meter, ...(spill ? { spill } : {}) });
  }
  if ((typeof SLUICE_BUNDLED_SINK === 'undefined' || SLUICE_BUNDLED_SINK === 's3-files') && spec.kind === 's3-files') {
    return new S3FilesSink({ ...s3SinkOptions(definition, config, clients, meter), format: spec.format, partitionBy: spec.partitionBy });
  }
  if ((typeof SLUICE_BUNDLED_SINK === 'undefined' || SLUICE_BUNDLED_SINK === 's3-snapshot') && spec.kind === 's3-snapshot') {
    return new S3SnapshotSink({ ...s3SinkOptions(definition, config, clients, meter), keyColumns, ancestorsOf });
  }
  throw new IllegalArgumentError(
    `This function was bundled for a ${typeof SLUICE_BUNDLED_SINK === 'string' ? SLUICE_BUNDLED_SINK : 'different'} sink; the query '${definition.name}' writes to a ${spec.kind} sink.`,
    { code: 'INVALID_RUNTIME_CONFIG', hint: 'redeploy: the construct bundles each function for its query\'s sink.' },
  );
}

function s3SinkOptions(definition: QueryDefinition, config: RuntimeConfig, clients: AwsClients, meter: CostMeter) {
  if (!config.sinkBucket) throw missing('SLUICE_SINK_BUCKET', 'the S3 sink bucket');
  // Every batch of an S3 sink writes S3: its SDK loads during init, not in the first invocation
  // (a failure to load surfaces at the first write, from the same promise).
  s3Sdk().catch(() => undefined);
  return { client: clients.s3, bucket: config.sinkBucket, prefix: sinkPrefixOf(definition, config), meter };
}

function missing(variable: string, what: string): IllegalArgumentError {
  return new IllegalArgumentError(`${variable} is not set: the query's sink needs ${what}.`, {
    code: 'INVALID_RUNTIME_CONFIG', hint: 'deploy with the SluiceQuery construct, which sets it, or set it in the function environment.',
  });
}
