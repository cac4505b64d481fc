/**
 * Issue 11 part 6: an invocation stops between batches when the deadline is too close (and says
 * where to resume), and a state that outgrows the function's memory fails loudly with what to
 * change. The deadline and the memory reading are injected: that is the one fault each case needs.
 */
import { describe, expect, it } from 'vitest';
import type { KinesisStreamEvent } from 'aws-lambda';
import { defineQuery } from '../../lib/query/query-definition.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { col, count, sum, window } from '../../lib/plan/functions.js';
import { MemoryDeadLetterWriter } from '../../lib/sources/dead-letter.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import type { Sink, SinkBatch } from '../../lib/sinks/sink.js';
import { runShardInvocation } from '../../lib/query/shard-invocation.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import type { PartitionBackends } from '../../lib/query/partition-backends.js';
import { createKinesisTriggerHandler } from '../../lib/aws/kinesis-trigger-handler.js';
import { createQuietObservability } from '../../lib/aws/observability.js';
import { StreamingQueryError } from '../../lib/errors/sluice-error.js';
import { readRuntimeConfig, runtimeConfigToEnv } from '../../lib/runtime/runtime-config.js';
import { invocationLimitsOf, MemoryHistory } from '../../lib/query/invocation-limits.js';

const definition = defineQuery({
  name: 'limits',
  source: { schema: 'k string, amount long, ts timestamp' },
  transform: (events) => events.withWatermark('ts', '15 minutes').groupBy(window(col('ts'), '1 hour'), col('k')).agg(sum('amount').as('total'), count('*').as('n')),
  outputMode: 'update',
  sink: { kind: 'dynamodb' },
});
const query = compileQuery(definition, { expectedShardCount: 1 });

let sequence = 5000n;
function records(n: number, firstKey = 0): ShardRecord[] {
  return Array.from({ length: n }, (_, i) => ({
    sequenceNumber: String(sequence++ * 1_000_000_000n),
    partitionKey: 'p',
    dataBase64: Buffer.from(JSON.stringify({ k: `k${firstKey + (i % 3)}`, amount: i + 1, ts: '2024-05-01T14:10:00Z' })).toString('base64'),
    approximateArrivalTimestampMs: 0,
  }));
}

/** Fails its first write with a retryable error: the batch stays planned and uncommitted. */
class FailOnceSink implements Sink {
  readonly description = 'FailOnceSink';
  readonly supportedOutputModes = new MemorySink().supportedOutputModes;
  readonly inner = new MemorySink();
  private failed = false;
  async addBatch(batch: SinkBatch): Promise<void> {
    if (!this.failed) {
      this.failed = true;
      throw new StreamingQueryError('throttled', { code: 'SINK_THROTTLED', retryable: true });
    }
    await this.inner.addBatch(batch);
  }
}

describe('the deadline', () => {
  it('a planned batch re-runs, then no batch starts that may not finish: the answer names the first record not run', async () => {
    const sink = new FailOnceSink();
    const b: PartitionBackends = { checkpoint: new MemoryCheckpoint(), sink, deadLetters: new MemoryDeadLetterWriter() };
    const planned = records(3);
    const failed = await runShardInvocation(query, { shardId: 's', records: planned }, b);
    expect(failed.error).toBeDefined();
    expect(failed.firstUncommittedSequenceNumber).toBe(planned[0]!.sequenceNumber);

    // Redelivered with new records: batch 0 re-runs (plenty of time), then 1 s is left.
    const more = records(2);
    const left = [60_000, 1_000];
    const result = await runShardInvocation(query, {
      shardId: 's', records: [...planned, ...more], limits: { remainingTimeMs: () => left.shift() ?? 0 },
    }, b);
    expect(result.error).toBeUndefined();
    expect(result.stoppedBy).toBe('deadline');
    expect(result.progress.map((p) => p.batchId)).toEqual([0]);
    expect(result.firstUncommittedSequenceNumber).toBe(more[0]!.sequenceNumber);
  });

  it('the Kinesis handler reads the Lambda context: with too little time left it runs nothing and answers the first record', async () => {
    const b: PartitionBackends & { sink: MemorySink } = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new MemoryDeadLetterWriter() };
    const handler = handlerOver(b);
    const delivered = records(4);
    const response = await handler(kinesisEvent(delivered), { getRemainingTimeInMillis: () => 500 });
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: delivered[0]!.sequenceNumber }]);
    expect(b.sink.allRows()).toEqual([]);
    // With time, the same delivery runs.
    const again = await handler(kinesisEvent(delivered), { getRemainingTimeInMillis: () => 60_000 });
    expect(again.batchItemFailures).toEqual([]);
    expect(b.sink.allRows().length).toBe(3);
  });

  it('the Kinesis handler stops between batches when the context\'s time runs short: the answer is the first record not run', async () => {
    const sink = new FailOnceSink();
    const b: PartitionBackends = { checkpoint: new MemoryCheckpoint(), sink, deadLetters: new MemoryDeadLetterWriter() };
    const handler = handlerOver(b);
    const planned = records(3);
    const first = await handler(kinesisEvent(planned), { getRemainingTimeInMillis: () => 60_000 });
    expect(first.batchItemFailures).toEqual([{ itemIdentifier: planned[0]!.sequenceNumber }]);
    // Redelivered with two more: the planned batch re-runs with a minute left, then 1 s is left.
    const more = records(2);
    const left = [60_000, 60_000, 1_000];
    const second = await handler(kinesisEvent([...planned, ...more]), { getRemainingTimeInMillis: () => left.shift() ?? 0 });
    expect(second.batchItemFailures).toEqual([{ itemIdentifier: more[0]!.sequenceNumber }]);
    expect(sink.inner.allRows().length).toBe(3);
    const third = await handler(kinesisEvent(more), { getRemainingTimeInMillis: () => 60_000 });
    expect(third.batchItemFailures).toEqual([]);
    expect(sink.inner.allRows().length).toBe(5);
  });
});

/** The Kinesis handler over in-memory backends (no AWS client is made). */
function handlerOver(b: PartitionBackends) {
  return createKinesisTriggerHandler(definition, {
    config: {
      checkpointTable: 'unused', stateTable: 'unused', sinkPrefix: '', deadLetterBucket: 'unused', deadLetterPrefix: 'dl/',
      streamName: 'unused', idleShardTimeoutMs: 0, snapshotEveryBatches: 20, expectedShardCount: 1,
    },
    backendsFor: () => b, reshardGuard: null,
    observability: createQuietObservability(definition.name),
  });
}

function kinesisEvent(delivered: readonly ShardRecord[]): KinesisStreamEvent {
  return {
    Records: delivered.map((r) => ({
      eventID: `shardId-000000000000:${r.sequenceNumber}`, eventName: 'aws:kinesis:record', eventSource: 'aws:kinesis', eventVersion: '1.0',
      eventSourceARN: 'arn:aws:kinesis:us-east-1:000000000000:stream/s', awsRegion: 'us-east-1', invokeIdentityArn: 'arn',
      kinesis: {
        kinesisSchemaVersion: '1.0', partitionKey: r.partitionKey, sequenceNumber: r.sequenceNumber,
        data: r.dataBase64, approximateArrivalTimestamp: 1_714_570_000,
      },
    })),
  };
}

const MB = 1024 * 1024;

describe('memory', () => {
  it.each([
    { case: 'well over the mark', used: 1000 },
    { case: 'just over the mark (85% of 1024 MB)', used: 871 },
  ])('a state that outgrows the function fails loudly after its batch commits, naming memory, shards and repartition count: $case', async ({ used }) => {
    const b: PartitionBackends & { sink: MemorySink } = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new MemoryDeadLetterWriter() };
    const result = await runShardInvocation(query, {
      shardId: 's', records: records(6), limits: { memory: { limitBytes: 1024 * MB, usedBytes: () => used * MB } },
    }, b);
    expect(result.error).toMatchObject({ code: 'STATE_EXCEEDS_MEMORY', retryable: false });
    expect(result.error!.message).toMatch(new RegExp(`after batch 0 the function uses ${used} MB of its 1024 MB at its peak with 3 state rows`));
    expect(result.error!.message).toMatch(/memorySize.*shardCount.*repartitionShardCount/s);
    // The batch that ran is committed: nothing is retried twice, nothing lost.
    expect(result.firstUncommittedSequenceNumber).toBeNull();
    expect(b.sink.allRows().length).toBe(3);
  });

  it('a warm container whose state grows toward its memory is refused the batch that may not fit, before it runs', async () => {
    // Each delivery adds 3 groups; the peak readings (the one fault injected) rise with the state.
    const b: PartitionBackends & { sink: MemorySink } = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new MemoryDeadLetterWriter() };
    const history = new MemoryHistory(100 * MB);
    const peaks = [500, 700, 700];
    const deliveries = [records(6, 0), records(6, 3), records(6, 6)];
    const results = [];
    for (const [i, delivered] of deliveries.entries()) {
      results.push(await runShardInvocation(query, {
        shardId: 's', records: delivered, limits: { memory: { limitBytes: 1024 * MB, usedBytes: () => peaks[i]! * MB, history } },
      }, b));
    }
    expect(results.slice(0, 2).map((r) => r.error)).toEqual([undefined, undefined]);
    // 700 MB at 6 rows, 600 MB of it above the baseline, a batch adds 3: 700 + 300 = 1000 MB > 870.
    const refused = results[2]!;
    expect(refused.error).toMatchObject({ code: 'STATE_EXCEEDS_MEMORY', retryable: false });
    expect(refused.error!.message.split('\n')[0]).toBe('Shard s: batch 2 was not started: it may need 1000 MB of the function\'s 1024 MB at its peak '
      + '(700 MB so far with 6 state rows on this shard, and a batch has added up to 3 rows), more than the 85% it may use; run, it could crash out of memory mid-batch.');
    expect((refused.error as StreamingQueryError).hint).toMatch(/memorySize.*shardCount.*repartitionShardCount/s);
    // Nothing of it ran: its records are the ones to retry, the sink has the first two deliveries' groups.
    expect(refused.progress).toEqual([]);
    expect(refused.firstUncommittedSequenceNumber).toBe(deliveries[2]![0]!.sequenceNumber);
    expect(b.sink.allRows().length).toBe(6);
  });

  it('a small state is not judged by a batch\'s growth alone: at most its own share of the peak is added', async () => {
    const history = new MemoryHistory(100 * MB);
    history.record('s', 10, 300 * MB);
    history.record('s', 10_010, 400 * MB);
    // 400 MB at 10,010 rows (300 above the baseline), +10,000 rows: about 700 MB, below 870.
    expect(Math.round(history.nextPeakBytes('s')!.bytes / MB)).toBe(700);
    const fresh = new MemoryHistory(100 * MB);
    fresh.record('s', 3, 300 * MB);
    fresh.record('s', 10_003, 300 * MB);
    // The peak did not rise with the 10,000 rows: their cost is judged at the 3 rows of the peak, bounded by one batch.
    expect(Math.round(fresh.nextPeakBytes('s')!.bytes / MB)).toBe(500);
    expect(new MemoryHistory(0).nextPeakBytes('s')).toBeNull();
  });

  it('below the high-water mark nothing changes', async () => {
    const b: PartitionBackends = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new MemoryDeadLetterWriter() };
    const result = await runShardInvocation(query, {
      shardId: 's', records: records(6), limits: { memory: { limitBytes: 1024 * MB, usedBytes: () => 870 * MB } },
    }, b);
    expect(result.error).toBeUndefined();
  });

  it('the handler judges the process\'s peak resident set: never below the set now, and it does not fall when garbage is freed', () => {
    const used = invocationLimitsOf(1024, undefined).memory!.usedBytes;
    const before = used();
    expect(before).toBeGreaterThanOrEqual(process.memoryUsage().rss - MB);
    // 64 MB allocated and dropped: the resident set rises, then may fall; the reading never does.
    let garbage: Buffer | null = Buffer.alloc(64 * MB, 1);
    const during = used();
    garbage = null;
    expect(garbage).toBeNull();
    expect(during).toBeGreaterThanOrEqual(before);
    expect(used()).toBeGreaterThanOrEqual(during);
  });
});

/** Takes `ms` to write each batch: a batch as slow as a cold start loading a large state. */
class SlowSink implements Sink {
  readonly description = 'SlowSink';
  readonly supportedOutputModes = new MemorySink().supportedOutputModes;
  readonly inner = new MemorySink();
  constructor(private readonly ms: number) {}
  async addBatch(batch: SinkBatch): Promise<void> {
    await new Promise((r) => setTimeout(r, this.ms));
    await this.inner.addBatch(batch);
  }
}

describe('a batch near the timeout', () => {
  it('a stateful batch over half the invocation\'s time fails loudly after it commits, naming timeout, memory, shards and repartition count', async () => {
    const sink = new SlowSink(60);
    const b: PartitionBackends = { checkpoint: new MemoryCheckpoint(), sink, deadLetters: new MemoryDeadLetterWriter() };
    const result = await runShardInvocation(query, {
      shardId: 's', records: records(6), limits: { remainingTimeMs: () => 100_000, budgetMs: 100 },
    }, b);
    expect(result.error).toMatchObject({ code: 'STATE_LOAD_NEAR_TIMEOUT', retryable: false });
    expect(result.error!.message).toMatch(/batch 0 took 0\.\d s of the invocation's 0\.1 s with 3 state rows/);
    expect((result.error as StreamingQueryError).hint).toMatch(/timeout.*memorySize.*shardCount.*repartitionShardCount/s);
    // Committed: the retry starts after it, nothing runs twice.
    expect(result.firstUncommittedSequenceNumber).toBeNull();
    expect(sink.inner.allRows().length).toBe(3);
  });

  it('with time to spare, or without state, nothing changes', async () => {
    const b: PartitionBackends = { checkpoint: new MemoryCheckpoint(), sink: new SlowSink(60), deadLetters: new MemoryDeadLetterWriter() };
    const spare = await runShardInvocation(query, { shardId: 's', records: records(6), limits: { remainingTimeMs: () => 100_000, budgetMs: 60_000 } }, b);
    expect(spare.error).toBeUndefined();
    const stateless = compileQuery(defineQuery({
      name: 'stateless', source: { schema: 'k string, amount long, ts timestamp' }, transform: (events) => events.filter(col('amount').gt(0)),
      outputMode: 'append', sink: { kind: 's3-files' },
    }), { expectedShardCount: 1 });
    const b2: PartitionBackends = { checkpoint: new MemoryCheckpoint(), sink: new SlowSink(60), deadLetters: new MemoryDeadLetterWriter() };
    const fast = await runShardInvocation(stateless, { shardId: 's', records: records(6), limits: { remainingTimeMs: () => 100_000, budgetMs: 100 } }, b2);
    expect(fast.error).toBeUndefined();
  });

  it('the invocation\'s time is the Lambda context\'s remaining time when the invocation begins', () => {
    let left = 60_000;
    const limits = invocationLimitsOf(1024, () => left);
    left = 1_000;
    expect(limits.budgetMs).toBe(60_000);
    expect(limits.remainingTimeMs!()).toBe(1_000);
    expect(invocationLimitsOf(1024, undefined).budgetMs).toBeUndefined();
  });
});

describe('the function memory the handler checks against', () => {
  const env = { SLUICE_CHECKPOINT_TABLE: 'c', SLUICE_STATE_TABLE: 's', SLUICE_DEAD_LETTER_BUCKET: 'd', SLUICE_STREAM_NAME: 'k' };
  it('is Lambda\'s own AWS_LAMBDA_FUNCTION_MEMORY_SIZE, unset off Lambda, and never set by the construct', () => {
    const onLambda = readRuntimeConfig({ ...env, AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '1024' });
    expect(onLambda.functionMemoryMb).toBe(1024);
    expect(readRuntimeConfig(env).functionMemoryMb).toBeUndefined();
    expect(Object.keys(runtimeConfigToEnv(onLambda))).not.toContain('AWS_LAMBDA_FUNCTION_MEMORY_SIZE');
  });
});
