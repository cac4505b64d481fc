/**
 * The harness's sink wrappers (the chaos function's faulting sink, the scheduled function's
 * recording sink) keep what the sink declares beyond its writes: without its row screen, stage 1's
 * partial-aggregation errors fell back to a search per record under chaos, capped at 64 a batch.
 */
import { describe, expect, it } from 'vitest';
import { col, count, sum } from '../../../lib/plan/functions.js';
import { defineQuery } from '../../../lib/query/query-definition.js';
import { MemoryCheckpoint } from '../../../lib/checkpoint/memory-checkpoint.js';
import { MemoryDeadLetterWriter } from '../../../lib/sources/dead-letter.js';
import { RepartitionSink } from '../../../lib/sinks/repartition-sink.js';
import type { Sink, SinkBatch } from '../../../lib/sinks/sink.js';
import { runShardInvocation } from '../../../lib/query/shard-invocation.js';
import { compileQuery } from '../../../lib/query/compiled-query.js';
import { withWrites } from '../../../lib/local/chaos/sink-wrapper.js';
import { MemoryInternalStream } from '../../support/memory-internal-stream.js';

describe('withWrites (the chaos sink wrappers)', () => {
  it('stage 1 of a repartitioned aggregate through the wrapper: 150 zero divisors among 300 records dead-lettered in one pass', async () => {
    const definition = defineQuery({
      name: 'spread', source: { schema: 'k string, amount long, qty long' }, outputMode: 'update', sink: { kind: 'dynamodb' },
      transform: (df) => df.groupBy(col('k')).agg(sum(col('amount').divide(col('qty'))).as('unit'), count('*').as('n')),
    });
    const compiled = compileQuery(definition, { allowRepartition: true });
    const stage = compiled.sourceStage;
    const channel = MemoryInternalStream.withShards(2);
    const inner = RepartitionSink.forHop(stage.outputHop!, channel);
    const attempts: SinkBatch[] = [];
    const sink = withWrites(inner, async (batch) => { attempts.push(batch); await inner.addBatch(batch); });
    const deadLetters = new MemoryDeadLetterWriter();
    const records = Array.from({ length: 300 }, (_, i) => ({
      sequenceNumber: String(1000 + i), partitionKey: `p${i}`, approximateArrivalTimestampMs: 0,
      dataBase64: Buffer.from(JSON.stringify({ k: 'a', amount: 2, qty: i % 2 })).toString('base64'),
    }));
    const result = await runShardInvocation(compiled, { shardId: 's', records }, { checkpoint: new MemoryCheckpoint(), sink, deadLetters });
    expect(result.error).toBeUndefined();
    expect(deadLetters.records).toHaveLength(150);
    expect(deadLetters.records.every((d) => /^DIVIDE_BY_ZERO/.test(d.reason))).toBe(true);
    expect(attempts.length).toBeGreaterThan(0);
  });

  it('forwards the row limits and the commit hook, and writes through the given function', async () => {
    const committed: string[] = [];
    const inner: Sink = {
      description: 'inner', supportedOutputModes: ['append'],
      rowLimits: { rowKey: (_batch, i) => String(i), check: () => ({ code: 'SINK_KEY_TOO_LONG', reason: 'key of 3000 bytes, the limit is 2048' }) },
      addBatch: async () => { throw new Error('the wrapper writes through its own function'); },
      onCommitted: async (partitionId, batchId) => { committed.push(`${partitionId}/${batchId}`); },
      screenRow: (row) => { if (row[0] === 'bad') throw new Error('screened'); },
    };
    const written: number[] = [];
    const sink = withWrites(inner, async (batch) => { written.push(batch.batchId); });
    expect(sink.rowLimits).toBe(inner.rowLimits);
    expect(() => sink.screenRow!(['bad'])).toThrow('screened');
    await sink.addBatch({ batchId: 7 } as SinkBatch);
    await sink.onCommitted!('shard-1', 7);
    expect([written, committed]).toEqual([[7], ['shard-1/7']]);
  });
});
