/**
 * The on-failure handler: consumes the on-failure queue (SQS) that every Kinesis event source
 * mapping of the query sends the batches it gave up to, and records each skipped range in the
 * checkpoint table (lib/aws/skipped-batches.ts) under the partition of the stage that reads its
 * stream. Idempotent, so SQS's at-least-once delivery records each range once; a message it cannot
 * record (DynamoDB unreachable) is answered as a batch item failure and comes back; a message that
 * is not a Kinesis on-failure record is logged and dropped (retrying it cannot help).
 */
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { compileForDeployment, internalStreamNames, type CompiledQuery, type DeployableQuery } from '../query/compiled-query.js';
import type { QueryStage } from '../query/query-stage.js';
import { isMultiSource } from '../query/query-definition.js';
import { readRuntimeConfig, streamNameOf, type RuntimeConfig } from '../runtime/runtime-config.js';
import type { AwsClientOptions, AwsClients } from './clients.js';
import { createFunctionClients } from './function-clients.js';
import { streamNameOfArn } from './kinesis-trigger-handler.js';
import { createObservability, type Observability } from './observability.js';
import { parseOnFailureRecord, SkippedBatchStore, type SkippedBatchInfo } from './skipped-batches.js';

export interface OnFailureHandlerOptions {
  readonly config?: RuntimeConfig;
  readonly clientOptions?: AwsClientOptions;
  readonly clients?: AwsClients;
  readonly observability?: Observability;
}

export type OnFailureHandler = (event: SQSEvent) => Promise<SQSBatchResponse>;

/** Where a skipped batch of `streamName` belongs: the stage reading that stream. */
export function stageOfStream(query: CompiledQuery, config: RuntimeConfig, streamName: string): QueryStage | undefined {
  const multi = isMultiSource(query.definition);
  const source = query.sourceStages.find((s) => streamNameOf(config, s.sourceName!, multi) === streamName);
  if (source) return source;
  const hop = internalStreamNames(config).indexOf(streamName);
  return hop < 0 ? undefined : query.stages.find((s) => s.reads === 'internal-stream' && s.inputHop?.index === hop);
}

/** Records one skipped batch; says where (or throws when no stage of the query reads its stream). */
export async function recordSkippedBatch(
  query: CompiledQuery, config: RuntimeConfig, store: SkippedBatchStore, info: SkippedBatchInfo,
): Promise<{ partitionId: string; recorded: boolean }> {
  const streamName = streamNameOfArn(info.streamArn);
  const stage = stageOfStream(query, config, streamName);
  if (!stage) throw new Error(`skipped batch of stream '${streamName}', which no stage of query '${query.name}' reads`);
  const partitionId = stage.checkpointPartition(info.shardId);
  return { partitionId, recorded: await store.record(partitionId, streamName, info) };
}

export function createOnFailureHandler(deployable: DeployableQuery, options: OnFailureHandlerOptions = {}): OnFailureHandler {
  const config = options.config ?? readRuntimeConfig();
  const query = compileForDeployment(deployable, config);
  const clients = options.clients ?? createFunctionClients(options.clientOptions);
  const store = new SkippedBatchStore({ client: clients.dynamodb, checkpointTable: config.checkpointTable, queryName: query.name });
  const observability = options.observability ?? createObservability(query.name);

  return async (event) => {
    const batchItemFailures: { itemIdentifier: string }[] = [];
    for (const message of event.Records) {
      let info: SkippedBatchInfo;
      try {
        info = parseOnFailureRecord(message.body);
      } catch (error) {
        observability.logger.error('dropped a message that is not a Kinesis on-failure record', { messageId: message.messageId, error: error as Error });
        continue;
      }
      try {
        const { partitionId, recorded } = await recordSkippedBatch(query, config, store, info);
        observability.logger.warn(recorded ? 'recorded a skipped batch' : 'skipped batch recorded before', {
          partitionId, first: info.startSequenceNumber, last: info.endSequenceNumber, batchSize: info.batchSize, reason: info.reason,
        });
      } catch (error) {
        observability.logger.error('could not record a skipped batch; SQS delivers it again', { messageId: message.messageId, error: error as Error });
        batchItemFailures.push({ itemIdentifier: message.messageId });
      }
    }
    return { batchItemFailures };
  };
}
