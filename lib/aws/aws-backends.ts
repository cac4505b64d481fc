/**
 * Wires the AWS adapters into the engine's backend interfaces for one deployed query: the
 * DynamoDB checkpoint and state of each state partition (shard), the sink its definition names,
 * the S3 dead-letter location, the cross-shard watermark coordinator and the shard reader.
 */
import type { QueryDefinition } from '../query/query-definition.js';
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
import { DynamoDbWatermarkCoordinator } from './dynamodb-watermarks.js';
import { KinesisShardReader, listStreamShards } from './kinesis-shard-reader.js';
import { S3DeadLetterWriter } from './s3-dead-letter-writer.js';
import { S3FilesSink } from './s3-files-sink.js';
import { S3SnapshotSink } from './s3-snapshot-sink.js';
import { KinesisRepartitionChannel } from './kinesis-repartition-channel.js';
import { RepartitionSink } from '../sinks/repartition-sink.js';

export interface AwsQueryBackends {
  readonly watermarks: DynamoDbWatermarkCoordinator;
  readonly shardReader: KinesisShardReader;
  readonly sink: Sink;
  /** Stage 1's sink, when the query has a repartition stage. */
  readonly repartitionSink: RepartitionSink | null;
  /** Reads the internal stream's shards (stage 2), when the query has a repartition stage. */
  readonly repartitionShardReader: KinesisShardReader | null;
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
    forPartition: (shardId, stage = query.sourceStage) => {
      const internal = stage.reads === 'internal-stream';
      return {
        checkpoint: new DynamoDbCheckpoint({
          client: clients.dynamodb, checkpointTable: config.checkpointTable, stateTable: config.stateTable,
          queryName: definition.name, partitionId: stage.checkpointPartition(shardId), meter, snapshotEvery: config.snapshotEveryBatches,
        }),
        sink: stage.writes === 'internal-stream' && repartitionSink ? repartitionSink : sink,
        ...(stage.writes === 'internal-stream' ? {} : { sinkRowLimits: resultSink.rowLimits }),
        deadLetters,
        watermarks,
        shardReader: internal && repartitionShardReader ? repartitionShardReader : shardReader,
        costMeter: meter,
        ...(internal ? { sourcePartitions } : {}),
      };
    },
  };
}

function createSink(
  definition: QueryDefinition, keyColumns: readonly string[], config: RuntimeConfig, clients: AwsClients, meter: CostMeter,
): Sink {
  const spec = definition.sink;
  if (spec.kind === 'dynamodb') {
    if (!config.sinkTable) throw missing('SLUICE_SINK_TABLE', 'the DynamoDB sink table');
    return new DynamoDbUpsertSink({ client: clients.dynamodb, tableName: config.sinkTable, keyColumns, meter });
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
