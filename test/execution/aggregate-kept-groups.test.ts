/**
 * Issue 11 part 6: over a key-value state store (DynamoDB), a warm container's aggregate keeps its
 * group table with the store's cached state, instead of rebuilding it from the whole state every
 * invocation (a second copy of every group per invocation, which the GC let pile up: at 1M keys a
 * warm peak of 1,951 MB for a 853 MB live set, bench/limits.ts). A batch that did not commit leaves
 * the table stale, and the next one rebuilds it.
 */
import { describe, expect, it } from 'vitest';
import { defineQuery } from '../../lib/query/query-definition.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { runShardInvocation } from '../../lib/query/shard-invocation.js';
import type { PartitionBackends } from '../../lib/query/partition-backends.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { DynamoDbStateStoreProvider, StateCache } from '../../lib/aws/dynamodb-state-store.js';
import type { StateStore, StateStoreProvider } from '../../lib/state/state-store.js';
import { MemoryDeadLetterWriter } from '../../lib/sources/dead-letter.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import type { Sink, SinkBatch } from '../../lib/sinks/sink.js';
import { StreamingQueryError } from '../../lib/errors/sluice-error.js';
import { col, count, sum, window } from '../../lib/plan/functions.js';
import { MemoryDynamoDb } from '../conformance/memory-dynamodb.js';

const query = compileQuery(defineQuery({
  name: 'kept',
  source: { schema: 'k string, amount long, ts timestamp' },
  transform: (events) => events.withWatermark('ts', '15 minutes').groupBy(window(col('ts'), '1 hour'), col('k')).agg(sum('amount').as('total'), count('*').as('n')),
  outputMode: 'update',
  sink: { kind: 'dynamodb' },
}), { expectedShardCount: 1 });

let sequence = 7000n;
const records = (keys: string[]): ShardRecord[] => keys.map((k, i) => ({
  sequenceNumber: String(sequence++ * 1_000_000_000n), partitionKey: 'p', approximateArrivalTimestampMs: 0,
  dataBase64: Buffer.from(JSON.stringify({ k, amount: i + 1, ts: '2024-05-01T14:10:00Z' })).toString('base64'),
}));

/** The DynamoDB state store (warm cache), counting the batches that list the whole state. */
function countingProvider(): { provider: StateStoreProvider; listings: () => number } {
  const inner = new DynamoDbStateStoreProvider({ client: new MemoryDynamoDb().asClient(), table: 'state', queryName: 'kept', partitionId: 'p0', cache: new StateCache() });
  let listings = 0;
  const provider: StateStoreProvider = {
    async open<V>(id: Parameters<StateStoreProvider['open']>[0], version: number): Promise<StateStore<V>> {
      const store = await inner.open<V>(id, version);
      return new Proxy(store, {
        get(target, prop, receiver) {
          const value = Reflect.get(target, prop, receiver) as unknown;
          if (prop === 'entries') listings++;
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        },
      });
    },
  };
  return { provider, listings: () => listings };
}

/** Fails the writes it is told to: that batch stays uncommitted. */
class FailingSink implements Sink {
  readonly description = 'FailingSink';
  readonly inner = new MemorySink();
  readonly supportedOutputModes = this.inner.supportedOutputModes;
  failNext = false;
  async addBatch(batch: SinkBatch): Promise<void> {
    if (this.failNext) {
      this.failNext = false;
      throw new StreamingQueryError('throttled', { code: 'SINK_THROTTLED', retryable: true });
    }
    await this.inner.addBatch(batch);
  }
}

function backendsOver(provider: StateStoreProvider, sink: Sink): PartitionBackends {
  const checkpoint = new MemoryCheckpoint();
  Object.defineProperty(checkpoint, 'stateStore', { value: provider });
  return { checkpoint, sink, deadLetters: new MemoryDeadLetterWriter() };
}

describe('the aggregate\'s groups over a key-value state store', () => {
  it('a warm container\'s next invocation reuses the table; an uncommitted batch makes the next one rebuild it, and the sums stay right', async () => {
    const { provider, listings } = countingProvider();
    const sink = new FailingSink();
    const b = backendsOver(provider, sink);
    const invoke = async (keys: string[]) => {
      const result = await runShardInvocation(query, { shardId: 's', records: records(keys) }, b);
      return { error: result.error?.message, listed: listings() };
    };

    // Each invocation is a new execution (a new operator), as in the Kinesis handler.
    expect(await invoke(['a', 'b'])).toEqual({ error: undefined, listed: 1 });
    expect(await invoke(['a', 'c'])).toEqual({ error: undefined, listed: 1 });
    expect(await invoke(['b'])).toEqual({ error: undefined, listed: 1 });
    // The sink refuses the next batch after it ran over the table: the table is ahead of the store.
    sink.failNext = true;
    const failed = records(['a', 'a']);
    const first = await runShardInvocation(query, { shardId: 's', records: failed }, b);
    expect(first.error?.message).toMatch(/throttled/);
    const retried = await runShardInvocation(query, { shardId: 's', records: failed }, b);
    expect(retried.error).toBeUndefined();
    expect(listings()).toBe(2);
    // a: 1 + 1 (first two deliveries), then 1 + 2 once (the failed batch's run is not counted twice).
    const latest = new Map(sink.inner.allRows().map((r) => [r[1], r]));
    expect([...latest.values()].map((r) => [r[1], r[2], r[3]]).sort()).toEqual([['a', 5, 4], ['b', 3, 2], ['c', 2, 1]]);
  });
});
