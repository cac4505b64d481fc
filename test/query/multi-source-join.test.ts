/**
 * Joins through the repartition hop on memory backends: two source streams (orders, payments),
 * each split over 1, 2 or 4 shards with random partition keys; stage 1 on every shard of each
 * routes rows by the join key through an in-memory internal stream; stage 2 holds both sides'
 * state. Whatever the shard counts and however records are duplicated, the answer is the
 * in-memory engine's.
 */
import { describe, expect, it } from 'vitest';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { MemoryDeadLetterWriter } from '../../lib/sources/dead-letter.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { RepartitionSink } from '../../lib/sinks/repartition-sink.js';
import { MemoryInternalStream } from '../support/memory-internal-stream.js';
import { runThroughHop } from '../support/run-through-hops.js';
import { runShardInvocation } from '../../lib/query/shard-invocation.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { explainQuery, validateQuery } from '../../lib/query/validate-query.js';
import { toExternalRow } from '../../lib/sinks/external-row.js';
import { defineQuery, type MultiSourceQueryDefinition } from '../../lib/query/query-definition.js';
import { col, count } from '../../lib/plan/functions.js';
import { interval } from '../../lib/plan/column.js';
import { streamNameOf } from '../../lib/runtime/runtime-config.js';
import { canonicalRow, inMemoryJoin, joinEvents, joinQuery, prng, type JoinShape } from '../support/join-queries.js';

describe('joins of two streams through the hop (memory backends)', () => {
  const events = joinEvents(240, 7);

  it('cuts each stream below its watermark and routes both sides by the join key', () => {
    const hop = validateQuery(joinQuery('cut', 'inner'), { allowRepartition: true }).hop!;
    expect(hop.inputs.map((i) => i.sourceId)).toEqual(['orders', 'payments']);
    expect(hop.routingColumns).toEqual(['order_id = ref']);
    expect(hop.inputs.map((i) => i.routingOrdinals)).toEqual([[0], [0]]);
    expect(hop.inputs.map((i) => i.eventTimeOrdinal)).toEqual([2, 2]);
    // payments' filter runs before the hop; the watermarks stay in stage 2.
    expect(hop.inputs[1]!.stage1.kind).toBe('Filter');
    expect(hop.watermarks).toEqual([{ inputs: ['orders'], delayMs: 600_000 }, { inputs: ['payments'], delayMs: 600_000 }]);
  });

  it('compiles to the stage planner\'s shape: one source stage per stream writing hop 1 tagged by input, the join stage reading it', () => {
    const query = compileQuery(joinQuery('shape', 'inner'), { allowRepartition: true });
    expect(query.repartition).toBeNull();
    expect(query.hops.map((h) => h.index)).toEqual([0]);
    expect(query.sourceStages.map((s) => [s.sourceName, s.outputHop?.index, s.hopInput])).toEqual([['orders', 0, 'orders'], ['payments', 0, 'payments']]);
    expect(query.sourceStages.map((s) => s.outputHop!.routingOrdinals)).toEqual([[0], [0]]);
    const joinStage = query.stageReadingHop(0);
    expect(joinStage).toBe(query.stateStage);
    expect([joinStage.kind, joinStage.index, joinStage.inputHop?.index, joinStage.writes]).toEqual(['state', 1, 0, 'sink']);
    expect(query.stages.filter((s) => s.reads === 'internal-stream')).toEqual([joinStage]);
  });

  for (const how of ['inner', 'left_outer', 'right_outer', 'full_outer', 'left_semi'] as const satisfies readonly JoinShape[]) {
    it(`${how}: same answer on 1, 2 and 4 shards per stream as in memory`, async () => {
      const def = joinQuery(`join-${how}`, how, { kind: 'dynamodb' });
      const expected = await inMemoryJoin(def, events);
      expect(expected.length).toBeGreaterThan(0);
      if (how !== 'inner' && how !== 'left_semi') expect(expected.some((r) => r.includes('null'))).toBe(true);
      for (const shards of [1, 2, 4]) {
        expect(await runThroughHop(def, { orders: events.orders, payments: events.payments }, shards, Math.max(1, shards - 1))).toEqual(expected);
      }
    });
  }

  it('duplicated internal records (PutRecords retries) are applied once', async () => {
    const def = joinQuery('join-dup', 'full_outer', { kind: 'dynamodb' });
    expect(await runThroughHop(def, { orders: events.orders, payments: events.payments }, 3, 2, 2)).toEqual(await inMemoryJoin(def, events));
  });

  it('stage 2 combines the per-operator watermarks by spark.sql.streaming.multipleWatermarkPolicy (min by default, max by option)', async () => {
    const watermarkOf = async (conf?: Record<string, string>): Promise<number> => {
      const query = compileQuery(joinQuery('policy', 'inner', { kind: 'dynamodb' }, conf), { allowRepartition: true });
      const binding = query.requireStateStage().bind('internal-0', {
        checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new MemoryDeadLetterWriter(),
        sourcePartitions: async () => ['shardId-0'],
      });
      const progress = (src: string, maxEventTimeMs: number) => ({ [src]: { batch: 0, parts: [0], complete: true, maxEventTimeMs, idle: false } });
      const offset = (sources: object) => ({ shardId: 'internal-0', sequenceNumber: '5', recordCount: 1, sources });
      binding.source.setCommitted(offset(progress('orders.shardId-0', 100 * 60_000)));
      (binding.otherSources![0] as typeof binding.source).setCommitted(offset(progress('payments.shardId-0', 50 * 60_000)));
      return binding.watermarks!.combine('state.internal-0', 0);
    };
    expect(await watermarkOf()).toBe(40 * 60_000);
    expect(await watermarkOf({ 'spark.sql.streaming.multipleWatermarkPolicy': 'max' })).toBe(90 * 60_000);
  });

  it('a union of two streams (stateless) runs on each stream\'s shards, in one stage', async () => {
    const def = defineQuery({
      name: 'union', sources: { a: { schema: 'k string, v long' }, b: { schema: 'k string, v long' } },
      transform: ({ a, b }) => a!.union(b!).filter(col('v').gt(1)), outputMode: 'append', sink: { kind: 's3-files' },
    });
    const query = compileQuery(def);
    expect(query.needsRepartition).toBe(false);
    expect(query.sourceStages.map((s) => s.partitionId('shardId-0'))).toEqual(['a.shardId-0', 'b.shardId-0']);
    const sinks = [new MemorySink(), new MemorySink()];
    const run = (name: string, rows: object[]) => runShardInvocation(query, {
      shardId: 'shardId-0', stage: query.sourceStageOf(name),
      records: rows.map((r, i) => ({ sequenceNumber: String(10 + i), partitionKey: 'p', dataBase64: Buffer.from(JSON.stringify(r)).toString('base64'), approximateArrivalTimestampMs: 0 })),
    }, { checkpoint: new MemoryCheckpoint(), sink: sinks[name === 'a' ? 0 : 1]!, deadLetters: new MemoryDeadLetterWriter() });
    expect((await run('a', [{ k: 'x', v: 1 }, { k: 'y', v: 2 }])).error).toBeUndefined();
    expect((await run('b', [{ k: 'z', v: 3 }])).error).toBeUndefined();
    expect(sinks.map((s) => s.allRows())).toEqual([[['y', 2]], [['z', 3]]]);
  });

  it('a stateful query over several streams without the hop is refused before it runs, naming the operator', () => {
    const def = defineQuery({
      name: 'count-both', sources: { a: { schema: 'k string' }, b: { schema: 'k string' } },
      transform: ({ a, b }) => a!.union(b!).groupBy(col('k')).agg(count('*').as('n')), outputMode: 'update', sink: { kind: 'dynamodb' },
    });
    expect(() => compileQuery(def, { expectedShardCount: 1 })).toThrow(/Stateful operator Aggregate reads several source streams/);
  });

  it('explain names each stream\'s stage 1 and the join stage', () => {
    const text = explainQuery(joinQuery('explain', 'left_outer'), { allowRepartition: true });
    expect(text).toMatch(/Stage 1 \(each shard of orders\).*routed by \[order_id = ref\]/);
    expect(text).toMatch(/Stage 1 \(each shard of payments\).*routed by \[order_id = ref\]/);
    expect(text).toMatch(/Stage 2 .*left_outer Join/);
  });

  it('a self-join of one stream through the hop is refused before it runs, with the fix', () => {
    const selfJoin = defineQuery({
      name: 'self', source: { schema: 'id string, kind string, ts timestamp' }, outputMode: 'append', sink: { kind: 's3-files' },
      transform: (events) => events.filter(col('kind').eq('order')).withWatermark('ts', '1 minute')
        .join(events.filter(col('kind').eq('payment')).withWatermark('ts', '1 minute').select(col('id').as('ref'), col('ts').as('pts')),
          col('id').eq(col('ref')).and(col('pts').between(col('ts'), col('ts').plus(interval('5 minutes'))))),
    });
    expect(() => compileQuery(selfJoin, { allowRepartition: true })).toThrow(/stream 'kinesis' is read twice \(a self-join\)/);
  });

  it('a deployment that names no stream for a declared source fails at cold start, naming the source', () => {
    const config = { streamName: 's-orders', sourceStreams: { orders: 's-orders' } } as never;
    expect(streamNameOf(config, 'orders', true)).toBe('s-orders');
    expect(() => streamNameOf(config, 'payments', true)).toThrow(/SLUICE_SOURCE_STREAMS names no stream for source 'payments'/);
  });

  it('a definition with both source and sources is refused', () => {
    expect(() => defineQuery({ ...joinQuery('both', 'inner'), source: { schema: 'a string' } } as never)).toThrow(/either source .* or sources/);
  });
});
