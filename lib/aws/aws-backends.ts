/**
 * Wires the AWS adapters into the engine's backend interfaces for one deployed query: the
 * DynamoDB checkpoint and state of each state partition (shard), the sink its definition names,
 * the S3 dead-letter location, the cross-shard watermark coordinator and the shard reader.
 */
import type { StreamingQueryDefinition } from '../query/query-definition.js';
import type { CompiledQuery } from '../query/compiled-query.js';
import type { PartitionBackends } from '../query/partition-backends.js';
import type { QueryStage } from '../query/query-stage.js';
import type { CostMeter } from '../core/cost-meter.js';
import { sinkPrefixFor, type RuntimeConfig } from '../runtime/runtime-config.js';
import type { Sink } from '../sinks/sink.js';
import { IllegalArgumentError } from '../errors/sluice-error.js';
import type { AwsClients } from './clients.js';
import { DynamoDbCheckpoint } from './dynamodb-checkpoint.js';
import { DynamoDbUpsertSink } from './dynamodb-upsert-sink.js';
import type { SpillLocation } from './dynamodb-spill.js';
import { DynamoDbWatermarkCoordinator } from './dynamodb-watermarks.js';
import { KinesisShardReader, listStreamShards } from './kinesis-shard-reader.js';
import type { SourceShard } from '../sources/repartition-records.js';
import { S3DeadLetterWriter } from './s3-dead-letter-writer.js';
import { S3FilesSink } from './s3-files-sink.js';
import { S3SnapshotSink } from './s3-snapshot-sink.js';
import { KinesisRepartitionChannel } from './kinesis-repartition-channel.js';
import { internalStreamNames } from '../query/compiled-query.js';
import { RepartitionSink } from '../sinks/repartition-sink.js';

export interface AwsQueryBackends {
  readonly watermarks: DynamoDbWatermarkCoordinator;
  readonly shardReader: KinesisShardReader;
  readonly sink: Sink;
  /** Stage 1's sink (hop 1), when the query has a repartition stage. */
  readonly repartitionSink: RepartitionSink | null;
  /** Reads the first internal stream's shards (stage 2), when the query has a repartition stage. */
  readonly repartitionShardReader: KinesisShardReader | null;
  /** The stream whose shards run `stage`: the source stream, or the internal stream it reads. */
  streamOf(stage: QueryStage): string;
  /** The reader of that stream. */
  readerOf(stage: QueryStage): KinesisShardReader;
  /**
   * One state partition's backends (default: of the query's source stage); the stage names its
   * checkpoint partition and says which stream it reads and where it writes.
   */
  forPartition(shardId: string, stage?: QueryStage): PartitionBackends;
}

export function sinkPrefixOf(definition: StreamingQueryDefinition, config: RuntimeConfig): string {
  return sinkPrefixFor(definition.name, definition.sink.kind === 'dynamodb' ? undefined : definition.sink.prefix, config.sinkPrefix);
}

export function createAwsQueryBackends(
  query: CompiledQuery,
  config: RuntimeConfig,
  clients: AwsClients,
  meter: CostMeter,
  decorateSink: (sink: Sink) => Sink = (sink) => sink,
): AwsQueryBackends {
  const { definition, repartition } = query;
  const resultSink = createSink(definition, query.keyColumns, config, clients, meter);
  const sink = decorateSink(resultSink);
  const deadLetters = new S3DeadLetterWriter({
    client: clients.s3, bucket: config.deadLetterBucket, prefix: config.deadLetterPrefix, meter,
  });
  const watermarks = new DynamoDbWatermarkCoordinator({
    client: clients.dynamodb, checkpointTable: config.checkpointTable, queryName: definition.name,
    idleTimeoutMs: config.idleShardTimeoutMs, meter,
  });
  const shardReader = new KinesisShardReader(clients.kinesis, config.streamName, meter);
  const hops = repartition?.hops ?? [];
  const streams = internalStreamNames(config);
  if (hops.length > 0 && streams.length < hops.length) {
    throw missing('SLUICE_REPARTITION_STREAMS', `${hops.length} internal repartition stream(s), one per hop`);
  }
  // One sink and one reader per hop: stage k writes hop k, stage k + 1 reads it.
  const hopSinks = hops.map((hop) => RepartitionSink.forHop(hop, new KinesisRepartitionChannel(clients.kinesis, streams[hop.index]!, meter), meter));
  const hopReaders = hops.map((hop) => new KinesisShardReader(clients.kinesis, streams[hop.index]!, meter));
  const streamOf = (stage: QueryStage): string => (stage.inputHop ? streams[stage.inputHop.index]! : config.streamName);
  const readerOf = (stage: QueryStage): KinesisShardReader => (stage.inputHop ? hopReaders[stage.inputHop.index]! : shardReader);
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
  return {
    watermarks,
    shardReader,
    sink,
    repartitionSink: hopSinks[0] ?? null,
    repartitionShardReader: hopReaders[0] ?? null,
    streamOf,
    readerOf,
    forPartition: (shardId, stage = query.sourceStage) => {
      const input = stage.inputHop;
      const output = stage.outputHop;
      // The senders of a stage's input: the source stream's shards, or the shards of the hop before.
      const senders = input === null ? null : input.index === 0 ? config.streamName : streams[input.index - 1]!;
      return {
        checkpoint: new DynamoDbCheckpoint({
          client: clients.dynamodb, checkpointTable: config.checkpointTable, stateTable: config.stateTable,
          queryName: definition.name, partitionId: stage.checkpointPartition(shardId), meter,
          snapshotEvery: config.snapshotEveryBatches, snapshotByBytes: true,
        }),
        sink: output ? hopSinks[output.index]! : sink,
        ...(output ? {} : { sinkRowLimits: resultSink.rowLimits }),
        deadLetters,
        watermarks,
        shardReader: readerOf(stage),
        costMeter: meter,
        ...(senders ? { sourcePartitions: () => shardsOf(senders) } : {}),
      };
    },
  };
}

function createSink(
  definition: StreamingQueryDefinition, keyColumns: readonly string[], config: RuntimeConfig, clients: AwsClients, meter: CostMeter,
): Sink {
  const spec = definition.sink;
  if (spec.kind === 'dynamodb') {
    if (!config.sinkTable) throw missing('SLUICE_SINK_TABLE', 'the DynamoDB sink table');
    let spill: SpillLocation | undefined;
    if (spec.onUnwritableRow === 'spill') {
      if (!config.sinkBucket) throw missing('SLUICE_SINK_BUCKET', "a bucket for the values onUnwritableRow: 'spill' moves out of oversized items");
      spill = { client: clients.s3, bucket: config.sinkBucket, prefix: sinkPrefixFor(definition.name, undefined, config.sinkPrefix) };
    }
    return new DynamoDbUpsertSink({ client: clients.dynamodb, tableName: config.sinkTable, keyColumns, meter, ...(spill ? { spill } : {}) });
  }
  if (!config.sinkBucket) throw missing('SLUICE_SINK_BUCKET', 'the S3 sink bucket');
  const options = { client: clients.s3, bucket: config.sinkBucket, prefix: sinkPrefixOf(definition, config), meter };
  return spec.kind === 's3-files' ? new S3FilesSink({ ...options, format: spec.format, partitionBy: spec.partitionBy }) : new S3SnapshotSink(options);
}

function missing(variable: string, what: string): IllegalArgumentError {
  return new IllegalArgumentError(`${variable} is not set: the query's sink needs ${what}.`, {
    code: 'INVALID_RUNTIME_CONFIG', hint: 'deploy with the SluiceQuery construct, which sets it, or set it in the function environment.',
  });
}
