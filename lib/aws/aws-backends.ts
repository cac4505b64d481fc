/**
 * Wires the AWS adapters into the engine's backend interfaces for one deployed query: the
 * DynamoDB checkpoint and state of each state partition (shard), the sink its definition names,
 * the S3 dead-letter location, the cross-shard watermark coordinator and the shard reader.
 */
import type { StreamingQueryDefinition } from '../api/query-definition.js';
import type { CostMeter } from '../runtime/cost-meter.js';
import { sinkPrefixFor, type RuntimeConfig } from '../runtime/runtime-config.js';
import type { PartitionBackends } from '../runtime/shard-trigger.js';
import type { Sink } from '../sinks/sink.js';
import { IllegalArgumentError } from '../errors/sluice-error.js';
import type { AwsClients } from './clients.js';
import { DynamoDbCheckpoint } from './dynamodb-checkpoint.js';
import { DynamoDbUpsertSink } from './dynamodb-upsert-sink.js';
import { DynamoDbWatermarkCoordinator } from './dynamodb-watermarks.js';
import { KinesisShardReader, listStreamShards } from './kinesis-shard-reader.js';
import { S3DeadLetterWriter } from './s3-dead-letter-writer.js';
import { S3FilesSink } from './s3-files-sink.js';
import { S3SnapshotSink } from './s3-snapshot-sink.js';
import { KinesisRepartitionChannel } from './kinesis-repartition-channel.js';
import { RepartitionSink } from '../sinks/repartition-sink.js';
import type { RepartitionPlan } from '../analysis/stages.js';
import type { TriggerStage } from '../runtime/shard-trigger.js';

export interface AwsQueryBackends {
  readonly watermarks: DynamoDbWatermarkCoordinator;
  readonly shardReader: KinesisShardReader;
  readonly sink: Sink;
  /** Stage 1's sink, when the query has a repartition stage. */
  readonly repartitionSink: RepartitionSink | null;
  /** Reads the internal stream's shards (stage 2), when the query has a repartition stage. */
  readonly repartitionShardReader: KinesisShardReader | null;
  /** One state partition's backends; stage 2 partitions are namespaced apart from source shards. */
  forPartition(shardId: string, stage?: TriggerStage): PartitionBackends;
}

/** Checkpoint partition of a shard: stage-2 shards live beside the source shards' partitions. */
export function checkpointPartitionOf(shardId: string, stage: TriggerStage = 'single'): string {
  return stage === 'state' ? `state.${shardId}` : shardId;
}

export function sinkPrefixOf(definition: StreamingQueryDefinition, config: RuntimeConfig): string {
  return sinkPrefixFor(definition.name, definition.sink.kind === 'dynamodb' ? undefined : definition.sink.prefix, config.sinkPrefix);
}

export function createAwsQueryBackends(
  definition: StreamingQueryDefinition,
  keyColumns: readonly string[],
  config: RuntimeConfig,
  clients: AwsClients,
  meter: CostMeter,
  decorateSink: (sink: Sink) => Sink = (sink) => sink,
  repartition: RepartitionPlan | null = null,
): AwsQueryBackends {
  const sink = decorateSink(createSink(definition, keyColumns, config, clients, meter));
  const deadLetters = new S3DeadLetterWriter({
    client: clients.s3, bucket: config.deadLetterBucket, prefix: config.deadLetterPrefix, meter,
  });
  const watermarks = new DynamoDbWatermarkCoordinator({
    client: clients.dynamodb, checkpointTable: config.checkpointTable, queryName: definition.name,
    idleTimeoutMs: config.idleShardTimeoutMs, meter,
  });
  const shardReader = new KinesisShardReader(clients.kinesis, config.streamName, meter);
  let repartitionSink: RepartitionSink | null = null;
  let repartitionShardReader: KinesisShardReader | null = null;
  if (repartition) {
    if (!config.repartitionStreamName) throw missing('SLUICE_REPARTITION_STREAM', 'the internal repartition stream');
    repartitionSink = new RepartitionSink({
      channel: new KinesisRepartitionChannel(clients.kinesis, config.repartitionStreamName, meter),
      routingOrdinals: repartition.routingOrdinals,
      eventTimeOrdinal: repartition.eventTime?.ordinal ?? null,
      meter,
    });
    repartitionShardReader = new KinesisShardReader(clients.kinesis, config.repartitionStreamName, meter);
  }
  let sourceShards: { at: number; ids: string[] } | null = null;
  const sourcePartitions = async (): Promise<string[]> => {
    if (!sourceShards || Date.now() - sourceShards.at > 30_000) {
      sourceShards = { at: Date.now(), ids: (await listStreamShards(clients.kinesis, config.streamName)).map((s) => s.ShardId!) };
    }
    return sourceShards.ids;
  };
  return {
    watermarks,
    shardReader,
    sink,
    repartitionSink,
    repartitionShardReader,
    forPartition: (shardId, stage = 'single') => ({
      checkpoint: new DynamoDbCheckpoint({
        client: clients.dynamodb, checkpointTable: config.checkpointTable, stateTable: config.stateTable,
        queryName: definition.name, partitionId: checkpointPartitionOf(shardId, stage), meter, snapshotEvery: config.snapshotEveryBatches,
      }),
      sink: stage === 'source' && repartitionSink ? repartitionSink : sink,
      deadLetters,
      watermarks,
      shardReader: stage === 'state' && repartitionShardReader ? repartitionShardReader : shardReader,
      costMeter: meter,
      ...(stage === 'state' ? { sourcePartitions } : {}),
    }),
  };
}

function createSink(
  definition: StreamingQueryDefinition, keyColumns: readonly string[], config: RuntimeConfig, clients: AwsClients, meter: CostMeter,
): Sink {
  const spec = definition.sink;
  if (spec.kind === 'dynamodb') {
    if (!config.sinkTable) throw missing('SLUICE_SINK_TABLE', 'the DynamoDB sink table');
    return new DynamoDbUpsertSink({ client: clients.dynamodb, tableName: config.sinkTable, keyColumns, meter });
  }
  if (!config.sinkBucket) throw missing('SLUICE_SINK_BUCKET', 'the S3 sink bucket');
  const options = { client: clients.s3, bucket: config.sinkBucket, prefix: sinkPrefixOf(definition, config), meter };
  return spec.kind === 's3-files' ? new S3FilesSink(options) : new S3SnapshotSink(options);
}

function missing(variable: string, what: string): IllegalArgumentError {
  return new IllegalArgumentError(`${variable} is not set: the query's sink needs ${what}.`, {
    code: 'INVALID_RUNTIME_CONFIG', hint: 'deploy with the SluiceQuery construct, which sets it, or set it in the function environment.',
  });
}
