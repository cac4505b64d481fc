/**
 * foreachBatch hands each micro-batch over as a static DataFrame with its batch id, as Spark's
 * does: the batch API runs on it (one bounded run of the same engine), and streaming-only or
 * static-only calls are refused with Spark's messages.
 */
import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { avg, col, count, lit, session_window, sum, upper } from '../../lib/plan/functions.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { udf } from '../../lib/plan/udf.js';

describe('foreachBatch((batchDF, batchId) => ...)', () => {
  it('gets each micro-batch as a static DataFrame: the batch API works on it, and it writes to a sink by batch id', async () => {
    const session = new SluiceSession();
    const { stream, df } = session.memoryStream('store string, amount long');
    const stores = session.createDataFrame([['s1', 'Paris'], ['s2', 'Lyon']], 'store string, city string');
    const sink = new MemorySink();
    const seen: { batchId: number; isStreaming: boolean; count: number; top: unknown[][]; table: string; cities: unknown[][] }[] = [];
    const query = await df.withColumn('label', upper(col('store'))).writeStream
      .foreachBatch(async (batch: DataFrame, batchId: number) => {
        const bigOnes = batch.filter(col('amount').gt(5)).withColumn('double', col('amount').multiply(2));
        const perCity = batch.join(stores, 'store', 'left').groupBy(col('city')).agg(sum('amount').as('total'), count('*').as('n')).orderBy(col('total').desc());
        seen.push({
          batchId,
          isStreaming: batch.isStreaming,
          count: batch.count(),
          top: bigOnes.orderBy(col('amount').desc()).limit(1).select('store', 'double').collect(),
          table: batch.select('store', 'amount').orderBy('amount').showString(),
          cities: perCity.collect(),
        });
        await perCity.withColumn('batch', lit(batchId)).write.sink(sink).batchId(batchId).save();
      })
      .checkpoint(new MemoryCheckpoint())
      .start();
    stream.addData([['s1', 3], ['s2', 10], ['s1', 7], ['s3', 1]]);
    await query.processAllAvailable();
    stream.addData([['s2', 4]]);
    await query.processAllAvailable();
    await query.stop();

    expect(seen.map((s) => [s.batchId, s.isStreaming, s.count])).toEqual([[0, false, 4], [1, false, 1]]);
    expect(seen[0]!.top).toEqual([['s2', 20]]);
    expect(seen[1]!.top).toEqual([]);
    expect(seen[0]!.cities).toEqual([['Paris', 10, 2], ['Lyon', 10, 1], [null, 1, 1]].sort((a, b) => (b[1] as number) - (a[1] as number)));
    expect(seen[1]!.table).toBe(['+-----+------+', '|store|amount|', '+-----+------+', '|   s2|     4|', '+-----+------+'].join('\n'));
    expect(sink.allRows().filter((r) => r[3] === 1)).toEqual([['Lyon', 4, 1, 1]]);
  });

  it('a batch re-run after a failure is handed over again with the same id and rows (make fn idempotent by batch id)', async () => {
    const { stream, df } = new SluiceSession().memoryStream('v long');
    const calls: [number, number][] = [];
    let failOnce = true;
    const query = await df.writeStream.foreachBatch((batch, batchId) => {
      calls.push([batchId, batch.agg(sum('v')).collect()[0]![0] as number]);
      if (failOnce) { failOnce = false; throw new Error('sink down'); }
    }).checkpoint(new MemoryCheckpoint()).start();
    stream.addData([[1], [2]]);
    await expect(query.processAllAvailable()).rejects.toThrow(/sink down/);
    expect(calls).toEqual([[0, 3]]);
  });
});

describe('static DataFrame actions', () => {
  const sales = () => new SluiceSession().createDataFrame([['a', 1], ['b', 5], ['a', 7], ['c', null]], 'k string, v long');

  it('count, limit, take, first, show', () => {
    expect(sales().count()).toBe(4);
    expect(sales().orderBy(col('k')).limit(2).collect()).toEqual([['a', 1], ['a', 7]]);
    expect(sales().limit(0).count()).toBe(0);
    expect(sales().take(1)).toEqual([['a', 1]]);
    expect(sales().filter(col('v').gt(100)).first()).toBeUndefined();
    expect(sales().groupBy('k').agg(avg('v').as('mean')).orderBy('k').showString(2)).toBe(
      ['+---+----+', '|  k|mean|', '+---+----+', '|  a| 4.0|', '|  b| 5.0|', '+---+----+', 'only showing top 2 rows'].join('\n'),
    );
    // A limited frame keeps its columns' identity: later references and joins still resolve.
    const limited = sales().as('s').limit(3);
    expect(limited.select(col('s.k')).collect()).toEqual([['a'], ['b'], ['a']]);
    expect(() => sales().limit(-1)).toThrow(/INVALID_LIMIT_LIKE_EXPRESSION.IS_NEGATIVE/);
  });

  it('a UDF runs in a static DataFrame too', () => {
    const tag = udf((k: string, v: number | null) => (v === null ? `${k}:none` : `${k}:${v}`), 'string');
    expect(sales().select(tag('k', 'v')).collect().flat()).toEqual(['a:1', 'b:5', 'a:7', 'c:none']);
  });
});

describe("refusals with Spark's messages", () => {
  it('writeStream on a static DataFrame: WRITE_STREAM_NOT_ALLOWED', () => {
    const df = new SluiceSession().createDataFrame([[1]], 'v int');
    expect(() => df.writeStream).toThrow('[WRITE_STREAM_NOT_ALLOWED] `writeStream` can be called only on streaming Dataset/DataFrame. SQLSTATE: 42601');
  });

  it('write, count, collect, show on a stream: CALL_ON_STREAMING_DATASET_UNSUPPORTED / must be executed with writeStream.start()', () => {
    const { df } = new SluiceSession().memoryStream('v long');
    expect(() => df.write).toThrow('[CALL_ON_STREAMING_DATASET_UNSUPPORTED] The method `write` can not be called on streaming Dataset/DataFrame. SQLSTATE: 42KDE');
    for (const action of [() => df.count(), () => df.collect(), () => df.show()]) {
      expect(action).toThrow('Queries with streaming sources must be executed with writeStream.start()');
    }
    expect(() => df.limit(5)).toThrow(/limit\(\) on a streaming DataFrame is not supported by Sluice/);
  });

  it('session_window on a static DataFrame is refused (Sluice merges sessions only in the streaming operator), not one session per row', () => {
    const df = new SluiceSession().createDataFrame([['a', 1_000_000], ['a', 2_000_000]], 'k string, ts timestamp');
    expect(() => df.groupBy(session_window(col('ts'), '10 seconds'), col('k')).agg(count('*'))).toThrow(/session_window\(\) in an aggregation of a static DataFrame is not supported by Sluice yet/);
    const { df: stream } = new SluiceSession().memoryStream('k string, ts timestamp');
    expect(stream.withWatermark('ts', '1 minute').groupBy(session_window(col('ts'), '10 seconds'), col('k')).agg(count('*')).isStreaming).toBe(true);
  });
});
