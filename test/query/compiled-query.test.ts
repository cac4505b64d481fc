/**
 * A deployed query is analysed once per container: the handler compiles it at cold start and
 * every invocation only binds the shard. The definition's `transform` counts its calls (each
 * analysis runs it once), so per-invocation analysis coming back fails these tests.
 */
import type { KinesisStreamEvent } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { createKinesisTriggerHandler, createRepartitionTriggerHandler } from '../../lib/aws/kinesis-trigger-handler.js';
import { createQuietObservability } from '../../lib/aws/observability.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { col, count, sum, window } from '../../lib/plan/functions.js';
import { collectNodes, type StreamingRelationNode } from '../../lib/plan/logical-plan.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import type { PartitionBackends } from '../../lib/query/partition-backends.js';
import { defineQuery, type StreamingQueryDefinition } from '../../lib/query/query-definition.js';
import { runShardInvocation } from '../../lib/query/shard-invocation.js';
import type { RuntimeConfig } from '../../lib/runtime/runtime-config.js';
import { MemoryDeadLetterWriter } from '../../lib/sources/dead-letter.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { RepartitionSink, type RepartitionChannel, type RepartitionRecordOut } from '../../lib/sinks/repartition-sink.js';

/** A definition whose transform counts how often the query is analysed. */
function counted(name: string, partitionKey?: string): { definition: StreamingQueryDefinition; analyses: () => number } {
  let calls = 0;
  const definition = defineQuery({
    name,
    source: { schema: 'store string, product string, amount long, ts timestamp', ...(partitionKey ? { partitionKey } : {}) },
    transform: (events) => {
      calls++;
      return events.withWatermark('ts', '10 minutes').groupBy(window(col('ts'), '1 hour'), col('product')).agg(sum('amount').as('revenue'), count('*').as('sales'));
    },
    outputMode: 'update',
    sink: { kind: 'dynamodb' },
  });
  return { definition, analyses: () => calls };
}

const config = (overrides: Partial<RuntimeConfig> = {}): RuntimeConfig => ({
  checkpointTable: 'unused', stateTable: 'unused', sinkPrefix: '', deadLetterBucket: 'unused', deadLetterPrefix: 'dl/',
  streamName: 'unused', idleShardTimeoutMs: 0, snapshotEveryBatches: 20, ...overrides,
});

let sequence = 1n;
/** A Kinesis event as Lambda delivers it: one shard, `n` sales in order. */
function kinesisEvent(shardId: string, n: number, minute: number): KinesisStreamEvent {
  return {
    Records: Array.from({ length: n }, (_, i) => {
      const seq = String(sequence++ * 1_000_000n);
      const data = JSON.stringify({ store: 's1', product: `p${i % 3}`, amount: i + 1, ts: `2024-05-01T14:${String(minute).padStart(2, '0')}:00Z` });
      return {
        eventID: `${shardId}:${seq}`, eventName: 'aws:kinesis:record', eventSource: 'aws:kinesis', eventVersion: '1.0',
        eventSourceARN: 'arn:aws:kinesis:us-east-1:000000000000:stream/s', awsRegion: 'us-east-1', invokeIdentityArn: 'arn',
        kinesis: {
          kinesisSchemaVersion: '1.0', partitionKey: 's1', sequenceNumber: seq,
          data: Buffer.from(data).toString('base64'), approximateArrivalTimestamp: 1_714_570_000,
        },
      };
    }),
  };
}

const memoryBackends = (): PartitionBackends & { sink: MemorySink } => ({
  checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new MemoryDeadLetterWriter(),
});

describe('a deployed query is compiled once per container', () => {
  it('the Kinesis handler analyses the query at cold start only, however many invocations follow', async () => {
    const { definition, analyses } = counted('compile-once-single');
    const partitions = new Map<string, PartitionBackends & { sink: MemorySink }>();
    const backendsFor = (shardId: string): PartitionBackends => partitions.get(shardId) ?? partitions.set(shardId, memoryBackends()).get(shardId)!;
    const handler = createKinesisTriggerHandler(definition, {
      config: config({ expectedShardCount: 1 }), backendsFor, reshardGuard: null, observability: createQuietObservability(definition.name),
    });
    expect(analyses()).toBe(1);
    for (let i = 0; i < 25; i++) {
      const response = await handler(kinesisEvent('shardId-000000000000', 4, i));
      expect(response.batchItemFailures).toEqual([]);
    }
    expect(analyses()).toBe(1);
    const sink = partitions.get('shardId-000000000000')!.sink;
    // 25 invocations of 4 sales each: every sale counted once, in the one hour window.
    const latest = new Map(sink.allRows().map((r) => [String(r[1]), Number(r[3])]));
    expect([...latest.values()].reduce((a, b) => a + b, 0)).toBe(100);
    // A new container compiles again, once.
    createKinesisTriggerHandler(definition, { config: config({ expectedShardCount: 1 }), backendsFor, reshardGuard: null, observability: createQuietObservability(definition.name) });
    expect(analyses()).toBe(2);
  });

  it('a repartition handler for a query whose state is co-partitioned is refused at cold start', () => {
    const { definition } = counted('co-partitioned');
    const create = () => createRepartitionTriggerHandler(definition, {
      config: config({ expectedShardCount: 1 }), backendsFor: () => memoryBackends(), reshardGuard: null, observability: createQuietObservability(definition.name),
    });
    expect(create).toThrow(expect.objectContaining({ code: 'NO_REPARTITION_STAGE', message: expect.stringMatching(/has no repartition stage/) }));
  });

  it('both handlers of a repartitioned query analyse once each, and a compiled query given to them not at all', async () => {
    const { definition, analyses } = counted('compile-once-staged', 'store');
    const internal: ShardRecord[] = [];
    const channel: RepartitionChannel = {
      shards: async () => [{ shardId: 'internal-0', startingHashKey: 0n, endingHashKey: 2n ** 128n - 1n }],
      put: async (records: readonly RepartitionRecordOut[]) => {
        for (const r of records) {
          internal.push({ sequenceNumber: String(sequence++ * 1_000_000n), partitionKey: r.partitionKey, dataBase64: Buffer.from(r.data).toString('base64'), approximateArrivalTimestampMs: 0 });
        }
      },
    };
    const withRepartition = config({ repartitionStreamName: 'internal' });
    const query = compileQuery(definition, { allowRepartition: true });
    expect(analyses()).toBe(1);
    const split = query.repartition!;
    const stage1Sink = new RepartitionSink({ channel, routingOrdinals: split.hops[0]!.routingOrdinals, eventTimeOrdinal: split.hops[0]!.eventTime?.ordinal ?? null });
    const stage1 = new Map<string, PartitionBackends>();
    const stage2 = memoryBackends();
    const source = createKinesisTriggerHandler(query, {
      config: withRepartition, observability: createQuietObservability(definition.name),
      backendsFor: (id) => stage1.get(id) ?? stage1.set(id, { ...memoryBackends(), sink: stage1Sink }).get(id)!,
    });
    const state = createRepartitionTriggerHandler(query, {
      config: withRepartition, observability: createQuietObservability(definition.name), backendsFor: () => stage2, reshardGuard: null,
    });
    let delivered = 0;
    for (let i = 0; i < 10; i++) {
      expect((await source(kinesisEvent(`shardId-00000000000${i % 2}`, 3, i))).batchItemFailures).toEqual([]);
      const pending = internal.slice(delivered);
      delivered = internal.length;
      const records = pending.map((r) => ({
        eventID: `internal-0:${r.sequenceNumber}`,
        kinesis: { sequenceNumber: r.sequenceNumber, partitionKey: r.partitionKey, data: r.dataBase64, approximateArrivalTimestamp: 0 },
      }));
      if (records.length > 0) expect((await state({ Records: records } as unknown as KinesisStreamEvent)).batchItemFailures).toEqual([]);
    }
    expect(stage2.sink.allRows().length).toBeGreaterThan(0);
    expect(analyses()).toBe(1);

    // Given the definition instead, each handler compiles it once at cold start.
    createKinesisTriggerHandler(definition, { config: withRepartition, observability: createQuietObservability(definition.name), backendsFor: () => memoryBackends(), reshardGuard: null });
    createRepartitionTriggerHandler(definition, { config: withRepartition, observability: createQuietObservability(definition.name), backendsFor: () => memoryBackends(), reshardGuard: null });
    expect(analyses()).toBe(3);
  });

  it('runShardInvocation reuses the compiled plan: its stream is named by id, bound per invocation', async () => {
    const { definition, analyses } = counted('compile-once-plan');
    const query = compileQuery(definition, { expectedShardCount: 1 });
    const relations = collectNodes(query.sourceStage.plan, (n): n is StreamingRelationNode => n.kind === 'StreamingRelation');
    expect(relations.map((r) => r.sourceId)).toEqual(['kinesis']);
    expect(relations.every((r) => !('source' in r))).toBe(true);
    const b = memoryBackends();
    const records = (n: number, minute: number): ShardRecord[] => kinesisEvent('s', n, minute).Records.map((r) => ({
      sequenceNumber: r.kinesis.sequenceNumber, partitionKey: r.kinesis.partitionKey, dataBase64: r.kinesis.data, approximateArrivalTimestampMs: 0,
    }));
    for (let i = 0; i < 5; i++) expect((await runShardInvocation(query, { shardId: 's', records: records(2, i) }, b)).error).toBeUndefined();
    expect(analyses()).toBe(1);
    expect(b.sink.latestBatchId).toBeGreaterThanOrEqual(4);
  });
});

describe('injected backends and the reshard guard', () => {
  // The chaos harness once injected backendsFor and so ran children of a split with empty state.
  it('a stateful stage with backendsFor needs reshardGuard said explicitly; a stateless one does not', async () => {
    const { definition } = counted('guard-required');
    const options = { config: config({ expectedShardCount: 1 }), backendsFor: () => memoryBackends(), observability: createQuietObservability(definition.name) };
    expect(() => createKinesisTriggerHandler(definition, options)).toThrow(/cannot guard reshards itself; pass reshardGuard/);
    const withRepartition: RuntimeConfig = { ...config({ expectedShardCount: 2 }), repartitionStreamName: 'internal' };
    expect(() => createKinesisTriggerHandler(definition, { ...options, config: withRepartition })).not.toThrow();
    expect(() => createRepartitionTriggerHandler(definition, { ...options, config: withRepartition })).toThrow(/reshardGuard/);

    // A given guard runs before every invocation of the shard, and its refusal retries the records.
    const checked: string[] = [];
    const handler = createKinesisTriggerHandler(definition, {
      ...options, reshardGuard: { check: async (shardId) => { checked.push(shardId); if (shardId.endsWith('9')) throw new Error('parent pending'); } },
    });
    expect((await handler(kinesisEvent('shardId-000000000001', 2, 0))).batchItemFailures).toEqual([]);
    const refused = kinesisEvent('shardId-000000000009', 2, 0);
    expect((await handler(refused)).batchItemFailures).toEqual([{ itemIdentifier: refused.Records[0]!.kinesis.sequenceNumber }]);
    expect(checked).toEqual(['shardId-000000000001', 'shardId-000000000009']);
  });
});
