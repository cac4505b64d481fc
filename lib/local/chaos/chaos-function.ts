/**
 * One deployed query as a Lambda function under fault injection: the REAL Kinesis handler
 * (createKinesisTriggerHandler, or createRepartitionTriggerHandler for a query's stage 2) over the
 * REAL AWS adapters (createAwsQueryBackends), run inside a simulated container. A container owns its SDK clients; a middleware on them counts the fault
 * points and injects the faults:
 *
 * - a kill (ChaosKill) strikes right after a chosen write succeeded; from then on every request of
 *   that container fails (the process is gone), the invocation ends in a function error, the warm
 *   state cache is dropped and the next invocation runs in a new container (new clients, new
 *   backends, new handler), as after a Lambda runtime crash;
 * - a throttle fails one request before it is sent, with the service's throttling exception
 *   (a mock only for that request: everything else goes to the emulators);
 * - around the handler: a duplicate delivery, a crash before running (a function error, which
 *   the event source mapping answers by bisecting the batch), a lost response (afterInvoke hook).
 */
import {
  ProvisionedThroughputExceededException, RequestLimitExceeded, ThrottlingException,
} from '@aws-sdk/client-dynamodb';
import { ProvisionedThroughputExceededException as KinesisThroughputExceeded } from '@aws-sdk/client-kinesis';
import { S3ServiceException } from '@aws-sdk/client-s3';
import type { Context, KinesisStreamBatchResponse, KinesisStreamEvent } from 'aws-lambda';
import type { StreamingQueryDefinition } from '../../query/query-definition.js';
import { compileForDeployment } from '../../query/compiled-query.js';
import { createAwsQueryBackends } from '../../aws/aws-backends.js';
import { createAwsClients, type AwsClientOptions, type AwsClients } from '../../aws/clients.js';
import { DynamoDbCheckpoint } from '../../aws/dynamodb-checkpoint.js';
import { StateCache } from '../../aws/dynamodb-state-store.js';
import { createKinesisTriggerHandler, createRepartitionTriggerHandler, shardIdOf, type KinesisTriggerHandler } from '../../aws/kinesis-trigger-handler.js';
import type { Observability } from '../../aws/observability.js';
import { CostMeter } from '../../core/cost-meter.js';
import type { RuntimeConfig } from '../../runtime/runtime-config.js';
import type { PartitionBackends } from '../../query/partition-backends.js';
import type { ShardInvocationResult } from '../../query/shard-invocation.js';
import type { Sink, SinkBatch } from '../../sinks/sink.js';
import type { EventSourceMappingHooks, HandlerResult } from '../event-source-mapping.js';
import { ChaosKill, type FaultController } from './faults.js';

interface Container {
  readonly id: number;
  readonly shardId: string;
  readonly clients: AwsClients;
  /** The process-level state cache of this container (Lambda keeps it between warm invocations). */
  readonly cache: StateCache;
  readonly handler: KinesisTriggerHandler;
  dead: boolean;
  killedBy?: string;
}

type Input = Record<string, unknown> & { TableName?: string; Key?: string; Item?: Record<string, { S?: string }>; TransactItems?: unknown[] };

export interface ChaosFunctionOptions {
  readonly definition: StreamingQueryDefinition;
  /**
   * Which function of the deployment: the source stream's (the whole query, or stage 1 when it
   * has a repartition stage) or the internal repartition stream's (stage 2). Default 'source'.
   */
  readonly kind?: 'source' | 'repartition';
  readonly config: RuntimeConfig;
  readonly clientOptions: AwsClientOptions;
  readonly controller: FaultController;
  readonly observability: Observability;
  readonly onInvocation?: (shardId: string, result: ShardInvocationResult) => void;
  /** Notes on what the harness did (with --trace). */
  readonly trace?: (line: string) => void;
}

export class ChaosFunction {
  /** The live container per shard: Lambda runs concurrent invocations in separate containers. */
  private readonly current = new Map<string, Container>();
  private containerCount = 0;
  private crashes = 0;
  /** Containers started (one per shard + one per simulated crash). */
  get containers(): number { return this.containerCount; }
  /** Simulated process deaths (kills and crashes), each followed by a cold container. */
  get processesKilled(): number { return this.crashes; }

  constructor(private readonly options: ChaosFunctionOptions) {}

  private containerFor(shardId: string): Container {
    let c = this.current.get(shardId);
    if (!c) this.current.set(shardId, (c = this.newContainer(shardId)));
    return c;
  }

  /** The function as the event source mapping invokes it. */
  readonly handler = async (event: KinesisStreamEvent, context: Context): Promise<KinesisStreamBatchResponse | void> => {
    const { controller } = this.options;
    const shardId = event.Records[0] ? shardIdOf(event.Records[0]) : '?';
    const container = this.containerFor(shardId);
    const fault = controller.hit('invocation', () => `${shardId}, ${event.Records.length} records from ${event.Records[0]?.kinesis.sequenceNumber.slice(-6)}`);
    if (fault?.kind === 'crash-before-run') {
      this.replace(container, 'crash before run');
      throw new Error('chaos: the runtime crashed before running the handler');
    }
    if (fault?.kind === 'concurrent-duplicate') {
      // A second container runs the same event at the same time (an invocation Lambda gave up on
      // that still runs, or an operator's manual re-run): the conditional writes must decide.
      const zombie = this.newContainer(shardId);
      const [mine, theirs] = await Promise.allSettled([container.handler(event, context), zombie.handler(structuredClone(event), context)]);
      zombie.clients.destroy();
      const show = (r: PromiseSettledResult<KinesisStreamBatchResponse | void>): string =>
        (r.status === 'rejected' ? `threw ${(r.reason as Error).message}` : JSON.stringify(r.value ?? null));
      this.options.trace?.(`concurrent duplicate on ${shardId}: container ${container.id} → ${show(mine)}; container ${zombie.id} → ${show(theirs)}`);
      this.checkAlive(container);
      if (theirs.status === 'rejected' && !(theirs.reason instanceof ChaosKill)) throw theirs.reason;
      if (mine.status === 'rejected') throw mine.reason;
      return mine.value;
    }
    let result = await container.handler(event, context);
    this.checkAlive(container);
    if (fault?.kind === 'duplicate-delivery') {
      result = await container.handler(structuredClone(event), context);
      this.checkAlive(container);
    }
    return result;
  };

  /** The event source mapping's afterInvoke hook: lost responses and deaths before the response. */
  readonly hooks: EventSourceMappingHooks = {
    afterInvoke: (event: KinesisStreamEvent, _result: HandlerResult) => {
      const shardId = event.Records[0] ? shardIdOf(event.Records[0]) : '?';
      const fault = this.options.controller.hit('response', () => `${shardId}, ${event.Records.length} records`);
      if (fault?.kind === 'kill-before-response') {
        this.replace(this.containerFor(shardId), 'killed before the response');
        throw new ChaosKill('chaos: the process died before Lambda got the response');
      }
      if (fault?.kind === 'response-lost') throw new Error('chaos: the response was lost');
    },
  };

  destroy(): void {
    for (const c of this.current.values()) c.clients.destroy();
    this.current.clear();
  }

  private checkAlive(container: Container): void {
    if (!container.dead) return;
    this.replace(container, container.killedBy ?? 'killed');
    throw new ChaosKill(`chaos: the process was killed (${container.killedBy})`);
  }

  /** A new container takes over; the dead one's warm state goes with it. */
  private replace(container: Container, reason: string): void {
    container.dead = true;
    container.killedBy ??= reason;
    if (this.current.get(container.shardId) === container) {
      this.crashes++;
      container.clients.destroy();
      // Its state cache goes with it: the next invocation starts in a cold container.
      container.cache.clear();
      this.current.delete(container.shardId);
    }
  }

  private newContainer(shardId: string): Container {
    const { definition, config, clientOptions, observability } = this.options;
    const clients = createAwsClients(clientOptions);
    const container: Container = {
      id: ++this.containerCount, shardId, clients, cache: new StateCache(), dead: false, handler: undefined as unknown as KinesisTriggerHandler,
    };
    this.instrument(container, clients);
    const kind = this.options.kind ?? 'source';
    // A cold container compiles the query once; its handler reuses the compiled query.
    const query = compileForDeployment(definition, config);
    const stage = kind === 'repartition' ? query.requireStateStage() : query.sourceStage;
    const backends = createAwsQueryBackends(query, config, clients, new CostMeter(), (sink) => this.wrapSink(container, sink));
    // The adapters' checkpoint as configured, but with this container's own state cache instead
    // of the module-level one: simulated containers share this process, Lambda's do not.
    const backendsFor = (id: string): PartitionBackends => {
      const b = backends.forPartition(id, stage);
      return { ...b, checkpoint: new DynamoDbCheckpoint({ ...(b.checkpoint as DynamoDbCheckpoint).options, stateCache: container.cache }) };
    };
    const create = kind === 'repartition' ? createRepartitionTriggerHandler : createKinesisTriggerHandler;
    (container as { handler: KinesisTriggerHandler }).handler = create(query, {
      config, backendsFor, observability, ...(this.options.onInvocation ? { onInvocation: this.options.onInvocation } : {}),
    });
    return container;
  }

  private kill(container: Container, why: string): never {
    container.dead = true;
    container.killedBy = why;
    throw new ChaosKill(`chaos: process killed ${why}`);
  }

  private wrapSink(container: Container, sink: Sink): Sink {
    const controller = this.options.controller;
    return {
      description: sink.description,
      supportedOutputModes: sink.supportedOutputModes,
      addBatch: async (batch: SinkBatch) => {
        await sink.addBatch(batch);
        const fault = controller.hit('sink-write', () => `${batch.partitionId} batch ${batch.batchId}, ${batch.rows.length} rows`);
        if (fault?.kind === 'kill-after-sink-write') this.kill(container, `after the sink wrote ${batch.partitionId} batch ${batch.batchId}`);
      },
      onCommitted: async (partitionId: string, batchId: number) => sink.onCommitted?.(partitionId, batchId),
    };
  }

  /** The fault middleware on the container's DynamoDB and S3 clients (outside the SDK's retries). */
  private instrument(container: Container, clients: AwsClients): void {
    const { controller, config } = this.options;
    const deadCheck = (): void => {
      if (container.dead) throw new ChaosKill(`chaos: container ${container.id} is dead (${container.killedBy})`);
    };

    clients.dynamodb.middlewareStack.add((next, context) => async (args) => {
      deadCheck();
      const command = (context as { commandName?: string }).commandName ?? '?';
      const input = args.input as Input;
      const table = input.TableName ?? '';
      const sk = input.Item?.sk?.S ?? '';
      const throttle = controller.hit('dynamodb-request', () => `${command} ${table} ${sk}`.trim());
      if (throttle) throw dynamoDbThrottle(controller.random());
      const output = await next(args);
      deadCheck();
      // Which write just succeeded: a kill planned for it strikes now, before the next step.
      if (command === 'PutItemCommand' && table === config.stateTable) {
        if (sk.startsWith('s#')) {
          const fault = controller.hit('state-snapshot-chunk-write', () => `${input.Item?.pk?.S} ${sk}`);
          if (fault?.kind === 'kill-between-state-writes') this.kill(container, `between state writes (after ${sk}, before its marker)`);
        } else if (sk.startsWith('d#') || sk.startsWith('m#')) {
          const fault = controller.hit('state-version-write', () => `${input.Item?.pk?.S} ${sk}`);
          if (fault?.kind === 'kill-after-state-commit') this.kill(container, `after state write ${sk}, before the commit`);
        }
      } else if (command === 'PutItemCommand' && table === config.checkpointTable && sk.startsWith('offset#')) {
        const fault = controller.hit('offset-write', () => `${input.Item?.pk?.S} ${sk}`);
        if (fault?.kind === 'kill-after-plan') this.kill(container, `after planning ${sk}`);
      } else if (command === 'TransactWriteItemsCommand') {
        const fault = controller.hit('commit-write', () => 'commit transaction');
        if (fault?.kind === 'kill-after-commit') this.kill(container, 'after the commit-log transaction');
      } else if (command === 'PutItemCommand' && table === config.sinkTable) {
        const fault = controller.hit('sink-partial-write', () => `sink item ${(input.Item as Record<string, { S?: string }> | undefined)?.pk?.S ?? ''}`);
        if (fault?.kind === 'kill-mid-sink-write') this.kill(container, 'in the middle of the DynamoDB sink upserts');
      }
      return output;
    }, { step: 'initialize', name: 'sluiceChaosDynamoDb' });

    clients.s3.middlewareStack.add((next, context) => async (args) => {
      deadCheck();
      const command = (context as { commandName?: string }).commandName ?? '?';
      const key = String((args.input as { Key?: string }).Key ?? '');
      const throttle = controller.hit('s3-request', () => `${command} ${key}`);
      if (throttle) throw s3SlowDown();
      const output = await next(args);
      deadCheck();
      if (command === 'PutObjectCommand' && /\/data\/partition=/.test(key)) {
        const fault = controller.hit('sink-partial-write', () => key);
        if (fault?.kind === 'kill-mid-sink-write') this.kill(container, `between the S3 data object ${key} and its manifest entry`);
      }
      return output;
    }, { step: 'initialize', name: 'sluiceChaosS3' });

    // The function's own Kinesis calls: the repartition stage's PutRecords to the internal stream
    // (stage 1's sink) and the shard reader's GetRecords.
    clients.kinesis.middlewareStack.add((next, context) => async (args) => {
      deadCheck();
      const command = (context as { commandName?: string }).commandName ?? '?';
      const stream = String((args.input as { StreamName?: string }).StreamName ?? '');
      const throttle = controller.hit('kinesis-request', () => `${command} ${stream}`.trim());
      if (throttle) throw kinesisThrottle();
      const output = await next(args);
      deadCheck();
      if (command === 'PutRecordsCommand') {
        const fault = controller.hit('sink-write', () => `PutRecords to ${stream}`);
        if (fault?.kind === 'kill-after-sink-write') this.kill(container, `after PutRecords to the internal stream ${stream}`);
      }
      return output;
    }, { step: 'initialize', name: 'sluiceChaosKinesis' });
  }
}

function dynamoDbThrottle(r: number): Error {
  const $metadata = { httpStatusCode: 400, requestId: 'chaos' };
  if (r < 0.5) return new ProvisionedThroughputExceededException({ $metadata, message: 'The level of configured provisioned throughput for the table was exceeded (chaos).' });
  if (r < 0.8) return new ThrottlingException({ $metadata, message: 'Rate of requests exceeds the allowed throughput (chaos).' });
  return new RequestLimitExceeded({ $metadata, message: 'Throughput exceeds the current throughput limit for your account (chaos).' });
}

function kinesisThrottle(): Error {
  return new KinesisThroughputExceeded({
    $metadata: { httpStatusCode: 400, requestId: 'chaos' },
    message: 'Rate exceeded for shard in stream (chaos).',
  });
}

function s3SlowDown(): Error {
  return new S3ServiceException({
    name: 'SlowDown', $fault: 'server', $metadata: { httpStatusCode: 503, requestId: 'chaos' },
    message: 'Please reduce your request rate (chaos).',
  });
}
