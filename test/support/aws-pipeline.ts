/**
 * An emulated deployment for integration tests: a stream, the tables and buckets of one query,
 * the real Kinesis-trigger handler driven by the local event source mapping.
 */
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { onTestFinished } from 'vitest';
import type { StreamingQueryDefinition } from '../../lib/query/query-definition.js';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import { createKinesisTriggerHandler, createRepartitionTriggerHandler, type KinesisTriggerOptions } from '../../lib/aws/kinesis-trigger-handler.js';
import { createQuietObservability } from '../../lib/aws/observability.js';
import { createScheduledTriggerHandler } from '../../lib/aws/scheduled-trigger-handler.js';
import { ensureTables } from '../../lib/aws/tables.js';
import { createStreamAndWait, putRecordsBatched } from '../../lib/local/kinesis-admin.js';
import { LocalEventSourceMapping, type LocalEventSourceMappingOptions } from '../../lib/local/event-source-mapping.js';
import type { EmulatorSet } from '../../lib/local/emulators.js';
import type { RuntimeConfig } from '../../lib/runtime/runtime-config.js';
import type { ShardInvocationResult } from '../../lib/query/shard-invocation.js';
import { deleteResources } from './cleanup.js';

let deployments = 0;

export interface Deployment {
  readonly clients: AwsClients;
  readonly config: RuntimeConfig;
  readonly results: { shardId: string; result: ShardInvocationResult }[];
  put(events: readonly { data: string; partitionKey: string }[]): Promise<void>;
  /** Runs the event source mapping until every shard is drained. */
  drain(options?: Partial<LocalEventSourceMappingOptions>, handlerOptions?: KinesisTriggerOptions): Promise<void>;
  /** One scheduled invocation, as EventBridge would invoke it at `nowMs`. */
  tick(nowMs: number, mode?: 'tick' | 'drain'): Promise<unknown>;
}

/** The deployed function an invocation runs as (its role), for tests that watch what each one sends. */
export type FunctionRole = 'kinesisTrigger' | 'scheduled' | 'repartition';
export type InvocationWrapper = <T>(role: FunctionRole, invoke: () => Promise<T>) => Promise<T>;

export async function deploy(
  emulators: EmulatorSet, definition: StreamingQueryDefinition, shards: number,
  options: {
    repartitionShards?: number; expectedShardCount?: number; asFunction?: InvocationWrapper;
    /** Internal streams to create (one per hop of the query's plan of stages; default 1 with repartitionShards). */
    hops?: number;
  } = {},
): Promise<Deployment> {
  const asFunction: InvocationWrapper = options.asFunction ?? ((_role, invoke) => invoke());
  const clients = createAwsClients(emulators.clientOptions);
  const id = `${process.pid}-${++deployments}-${Date.now() % 100_000}`;
  const config: RuntimeConfig = {
    checkpointTable: `sluice-checkpoint-${id}`,
    stateTable: `sluice-state-${id}`,
    sinkBucket: `sluice-sink-${id}`,
    sinkPrefix: 'results/',
    sinkTable: `sluice-sink-${id}`,
    deadLetterBucket: `sluice-dlq-${id}`,
    deadLetterPrefix: 'dead-letter/',
    streamName: `sluice-stream-${id}`,
    idleShardTimeoutMs: 60_000,
    expectedShardCount: 'expectedShardCount' in options ? options.expectedShardCount : shards,
    snapshotEveryBatches: 3,
    ...(options.repartitionShards ? { repartitionStreamName: `sluice-repartition-${id}` } : {}),
    ...(options.repartitionShards && (options.hops ?? 1) > 1
      ? { repartitionStreamNames: Array.from({ length: options.hops! }, (_, i) => (i === 0 ? `sluice-repartition-${id}` : `sluice-repartition-${id}-${i + 1}`)) }
      : {}),
  };
  const internalStreams = config.repartitionStreamNames ?? (config.repartitionStreamName ? [config.repartitionStreamName] : []);
  // Called inside a test: what it creates is deleted when the test ends, passed or failed.
  onTestFinished(async () => {
    await deleteResources(clients, {
      streams: [config.streamName, ...internalStreams],
      tables: [config.checkpointTable, config.stateTable, config.sinkTable!],
      buckets: [config.sinkBucket!, config.deadLetterBucket],
    });
    clients.destroy();
  });
  await createStreamAndWait(clients.kinesis, config.streamName, shards);
  for (const internal of internalStreams) await createStreamAndWait(clients.kinesis, internal, options.repartitionShards);
  await ensureTables(clients.dynamodb, { checkpointTable: config.checkpointTable, stateTable: config.stateTable, sinkTable: config.sinkTable });
  await clients.s3.send(new CreateBucketCommand({ Bucket: config.sinkBucket }));
  await clients.s3.send(new CreateBucketCommand({ Bucket: config.deadLetterBucket }));
  const results: Deployment['results'] = [];
  const asHandler = <A extends unknown[], R>(role: FunctionRole, handler: (...args: A) => Promise<R>) =>
    (...args: A) => asFunction(role, () => handler(...args));
  const observability = createQuietObservability(definition.name);
  return {
    clients,
    config,
    results,
    async put(events) {
      await putRecordsBatched(clients.kinesis, config.streamName, events.map((e) => ({ data: e.data, partitionKey: e.partitionKey })));
    },
    async drain(options = {}, handlerOptions = {}) {
      const handlerOptions_ = {
        config, clientOptions: emulators.clientOptions, observability,
        onInvocation: (shardId: string, result: ShardInvocationResult) => { results.push({ shardId, result }); },
        ...handlerOptions,
      };
      const mappings = [new LocalEventSourceMapping({
        kinesis: clients.kinesis, streamName: config.streamName, handler: asHandler('kinesisTrigger', createKinesisTriggerHandler(definition, handlerOptions_)),
        batchSize: 4, bisectBatchOnFunctionError: true, pollIntervalMs: 50, ...options,
      })];
      // One repartition function, one mapping per internal stream (it runs the stage reading the record's stream).
      const repartitionHandler = internalStreams.length > 0 ? asHandler('repartition', createRepartitionTriggerHandler(definition, handlerOptions_)) : null;
      for (const internal of internalStreams) {
        mappings.push(new LocalEventSourceMapping({
          kinesis: clients.kinesis, streamName: internal, handler: repartitionHandler!,
          batchSize: 10, bisectBatchOnFunctionError: true, pollIntervalMs: 50, ...options,
        }));
      }
      // The internal streams' mappings run beside the source's, as Lambda would.
      await Promise.all(mappings.map((m) => m.drain({ idleMs: 600 })));
      // One more round per internal stream: each stage's output is the next one's input.
      for (let round = 0; round < Math.max(1, internalStreams.length); round++) await Promise.all(mappings.map((m) => m.drain({ idleMs: 400 })));
      await Promise.all(mappings.map((m) => m.stop()));
    },
    async tick(nowMs, mode = 'tick') {
      const handler = createScheduledTriggerHandler(definition, {
        config, clients, observability, now: () => nowMs,
        onInvocation: (shardId, result) => { results.push({ shardId, result }); },
      });
      return asFunction('scheduled', () => handler({ mode }));
    },
  };
}
