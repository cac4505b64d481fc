/**
 * An emulated deployment for integration tests: a stream, the tables and buckets of one query,
 * the real Kinesis-trigger handler driven by the local event source mapping.
 */
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { onTestFinished } from 'vitest';
import { isMultiSource, sourcesOf, type QueryDefinition } from '../../lib/query/query-definition.js';
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
  /** Writes to the query's stream, or to the stream of source `source` of a query over several. */
  /** `explicitHashKey` places a record on the shard whose range holds it, whatever its partition key. */
  put(events: readonly { data: string; partitionKey: string; explicitHashKey?: string }[], source?: string): Promise<void>;
  /**
   * Runs the event source mapping until every shard is drained; with `redeployed`, the handlers run
   * that definition instead (a new version of the query deployed over the same resources).
   */
  drain(options?: DrainOptions, handlerOptions?: KinesisTriggerOptions, redeployed?: QueryDefinition): Promise<void>;
  /**
   * `steps` rounds of: `putStep(step)`, then the source streams' mappings until idle, then each
   * internal stream's in hop order. Each invocation then holds exactly what its stage was sent in
   * that round, however the machine's load interleaves the stages (measured runs that compare with
   * a model of steady arrival).
   */
  drainInSteps(steps: number, putStep: (step: number) => Promise<void>, options?: DrainOptions): Promise<void>;
  /** One scheduled invocation, as EventBridge would invoke it at `nowMs` (with `redeployed`: that definition's code). */
  tick(nowMs: number, mode?: 'tick' | 'drain', redeployed?: QueryDefinition): Promise<unknown>;
}

/** `internalBatchSize`: the internal streams' mappings' batch size, when it differs from the sources'. */
export type DrainOptions = Partial<LocalEventSourceMappingOptions> & { internalBatchSize?: number };

/** The deployed function an invocation runs as (its role), for tests that watch what each one sends. */
export type FunctionRole = 'kinesisTrigger' | 'scheduled' | 'repartition';
/** `event`: what the function was invoked with (a Kinesis event, the scheduled payload). */
export type InvocationWrapper = <T>(role: FunctionRole, invoke: () => Promise<T>, event?: unknown) => Promise<T>;

export async function deploy(
  emulators: EmulatorSet, definition: QueryDefinition, shards: number,
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
    // A query over several streams: one stream per source, `shards` shards each; the first is also streamName.
    ...(isMultiSource(definition)
      ? { sourceStreams: Object.fromEntries(sourcesOf(definition).map((s, i) => [s.name, i === 0 ? `sluice-stream-${id}` : `sluice-stream-${id}-${s.name}`])) }
      : {}),
  };
  const internalStreams = config.repartitionStreamNames ?? (config.repartitionStreamName ? [config.repartitionStreamName] : []);
  const sourceStreamNames = config.sourceStreams ? Object.values(config.sourceStreams) : [config.streamName];
  // Called inside a test: what it creates is deleted when the test ends, passed or failed.
  onTestFinished(async () => {
    await deleteResources(clients, {
      streams: [...sourceStreamNames, ...internalStreams],
      tables: [config.checkpointTable, config.stateTable, config.sinkTable!],
      buckets: [config.sinkBucket!, config.deadLetterBucket],
    });
    clients.destroy();
  });
  for (const name of sourceStreamNames) await createStreamAndWait(clients.kinesis, name, shards);
  for (const internal of internalStreams) await createStreamAndWait(clients.kinesis, internal, options.repartitionShards);
  await ensureTables(clients.dynamodb, { checkpointTable: config.checkpointTable, stateTable: config.stateTable, sinkTable: config.sinkTable });
  await clients.s3.send(new CreateBucketCommand({ Bucket: config.sinkBucket }));
  await clients.s3.send(new CreateBucketCommand({ Bucket: config.deadLetterBucket }));
  const results: Deployment['results'] = [];
  const asHandler = <A extends unknown[], R>(role: FunctionRole, handler: (...args: A) => Promise<R>) =>
    (...args: A) => asFunction(role, () => handler(...args), args[0]);
  const observability = createQuietObservability(definition.name);
  /** The construct's event source mappings: one per source stream, then one per internal stream in hop order. */
  const mappingsFor = (options: DrainOptions, handlerOptions: KinesisTriggerOptions, redeployed: QueryDefinition) => {
    const handlerOptions_ = {
      config, clientOptions: emulators.clientOptions, observability,
      onInvocation: (shardId: string, result: ShardInvocationResult) => { results.push({ shardId, result }); },
      ...handlerOptions,
    };
    // One function, an event source mapping per source stream (as the construct deploys it).
    const sourceHandler = asHandler('kinesisTrigger', createKinesisTriggerHandler(redeployed, handlerOptions_));
    const sources = sourceStreamNames.map((streamName) => new LocalEventSourceMapping({
      kinesis: clients.kinesis, streamName, handler: sourceHandler,
      batchSize: 4, bisectBatchOnFunctionError: true, pollIntervalMs: 50, ...options,
    }));
    // One repartition function, one mapping per internal stream (it runs the stage reading the record's stream).
    const repartitionHandler = internalStreams.length > 0 ? asHandler('repartition', createRepartitionTriggerHandler(redeployed, handlerOptions_)) : null;
    const internal = internalStreams.map((streamName) => new LocalEventSourceMapping({
      kinesis: clients.kinesis, streamName, handler: repartitionHandler!,
      batchSize: 10, bisectBatchOnFunctionError: true, pollIntervalMs: 50, ...options,
      ...(options.internalBatchSize ? { batchSize: options.internalBatchSize } : {}),
    }));
    return { sources, internal };
  };
  return {
    clients,
    config,
    results,
    async put(events, source) {
      const stream = source === undefined ? config.streamName : config.sourceStreams?.[source];
      if (!stream) throw new Error(`no stream for source '${source}'`);
      await putRecordsBatched(clients.kinesis, stream, events.map((e) => ({ data: e.data, partitionKey: e.partitionKey, ...(e.explicitHashKey ? { explicitHashKey: e.explicitHashKey } : {}) })));
    },
    async drain(options = {}, handlerOptions = {}, redeployed = definition) {
      const { sources, internal } = mappingsFor(options, handlerOptions, redeployed);
      const mappings = [...sources, ...internal];
      // The internal streams' mappings run beside the source's, as Lambda would.
      await Promise.all(mappings.map((m) => m.drain({ idleMs: 600 })));
      // One more round per internal stream: each stage's output is the next one's input.
      for (let round = 0; round < Math.max(1, internalStreams.length); round++) await Promise.all(mappings.map((m) => m.drain({ idleMs: 400 })));
      await Promise.all(mappings.map((m) => m.stop()));
    },
    async drainInSteps(steps, putStep, options = {}) {
      const { sources, internal } = mappingsFor(options, {}, definition);
      try {
        for (let step = 0; step < steps; step++) {
          await putStep(step);
          // Idle needs an empty poll begun after the last invocation, so a short wait is enough here:
          // the round's input was put before its drain began.
          await Promise.all(sources.map((m) => m.drain({ idleMs: 100 })));
          for (const m of internal) await m.drain({ idleMs: 100 });
        }
      } finally {
        await Promise.all([...sources, ...internal].map((m) => m.stop()));
      }
    },
    async tick(nowMs, mode = 'tick', redeployed = definition) {
      const handler = createScheduledTriggerHandler(redeployed, {
        config, clients, observability, now: () => nowMs,
        onInvocation: (shardId, result) => { results.push({ shardId, result }); },
      });
      return asFunction('scheduled', () => handler({ mode }));
    },
  };
}
