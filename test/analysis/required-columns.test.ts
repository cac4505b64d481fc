/**
 * requiredSourceColumns: per streaming source, the columns the query reads (Spark's column pruning
 * pushed into the scan). A column is required when an expression reads it, it is a key, or it
 * reaches the sink; everything else may be left undecoded.
 */
import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { requiredSourceColumns } from '../../lib/analysis/required-columns.js';
import { col, count, explode, expr, lit, session_window, split, sum, window } from '../../lib/plan/functions.js';
import type { MicroBatchStream } from '../../lib/sources/source.js';

/** Required columns per source name, sorted, so the assertions do not depend on order. */
function required(df: DataFrame): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [sourceId, names] of requiredSourceColumns(df.plan)) out[sourceId] = [...names].sort();
  return out;
}

function source(schema: string, name: string): { stream: MicroBatchStream; df: DataFrame } {
  return new SluiceSession().memoryStream(schema, name);
}

const EVENTS = 'a string, b long, c long, d string';

describe('requiredSourceColumns', () => {
  it('a projection of two columns needs only those two', () => {
    const { df } = source(EVENTS, 'events');
    expect(required(df.select('a', 'b'))).toEqual({ events: ['a', 'b'] });
    expect(required(df.select('d', 'a'))).toEqual({ events: ['a', 'd'] });
  });

  it('a filter on a third column plus a select of others needs the filter column too', () => {
    const { df } = source(EVENTS, 'events');
    expect(required(df.filter(col('c').gt(0)).select('a', 'b'))).toEqual({ events: ['a', 'b', 'c'] });
    // Filter above the projection: the filter reads only projected columns.
    expect(required(df.select('a', 'b').filter(col('b').gt(0)))).toEqual({ events: ['a', 'b'] });
  });

  it('a computed column needs its inputs, not the names it produces', () => {
    const { df } = source(EVENTS, 'events');
    expect(required(df.select(col('b').plus(col('c')).as('bc')))).toEqual({ events: ['b', 'c'] });
    expect(required(df.select(lit(1).as('one'), col('d')))).toEqual({ events: ['d'] });
  });

  it('a projection under a narrower projection: only the columns the outer one keeps are read', () => {
    const { df } = source(EVENTS, 'events');
    expect(required(df.select('a', 'b', 'c').select('a'))).toEqual({ events: ['a'] });
    // withColumn replacing `a` with a value computed from `b`: the original `a` is never read.
    expect(required(df.withColumn('a', col('b').plus(1)).select('a'))).toEqual({ events: ['b'] });
  });

  it('a projection that changes the row count keeps its input even when the column it makes is dropped above', () => {
    // explode: one row per element, so the exploded column decides how many rows reach the sink.
    const { df } = source(EVENTS, 'events');
    expect(required(df.select(col('a'), explode(split(col('d'), ',')).as('part')).select('a'))).toEqual({ events: ['a', 'd'] });
  });

  it('window() in a projection keeps its time column even when the window is dropped above (it filters NULL times and a sliding window multiplies rows)', () => {
    // Spark's TimeWindowing: Filter(isnotnull(time)) under a tumbling window, Expand for a sliding one,
    // so the row count depends on the time column and pruning runs after it.
    const { df } = source('k string, ts timestamp, junk string', 'clicks');
    expect(required(df.select(col('k'), window(col('ts'), '10 seconds', '5 seconds').as('w')).select('k'))).toEqual({ clicks: ['k', 'ts'] });
    expect(required(df.select(col('k'), window(col('ts'), '10 seconds').as('w')).select('k'))).toEqual({ clicks: ['k', 'ts'] });
  });

  it('a watermarked windowed aggregation needs the event time, the key and the summed column only', () => {
    const { df } = source('k string, x long, y long, ts timestamp, note string', 'clicks');
    const q = df.withWatermark('ts', '10 seconds').groupBy(window(col('ts'), '1 minute'), col('k')).agg(sum('x').as('total'));
    expect(required(q)).toEqual({ clicks: ['k', 'ts', 'x'] });
  });

  it('the event-time column is kept for the watermark even when nothing else reads it', () => {
    const { df } = source('k string, x long, ts timestamp', 'clicks');
    expect(required(df.withWatermark('ts', '10 seconds').groupBy('k').agg(sum('x')))).toEqual({ clicks: ['k', 'ts', 'x'] });
    expect(required(df.withWatermark('ts', '10 seconds').groupBy('k').count())).toEqual({ clicks: ['k', 'ts'] });
  });

  it('a session window aggregation needs the time column and the key', () => {
    const { df } = source('k string, x long, ts timestamp, junk string', 'clicks');
    const q = df.withWatermark('ts', '10 seconds').groupBy(session_window(col('ts'), '5 minutes'), col('k')).agg(count().as('n'));
    expect(required(q)).toEqual({ clicks: ['k', 'ts'] });
  });

  it('a query whose root passes every column through (filter only) needs all columns', () => {
    const { df } = source(EVENTS, 'events');
    expect(required(df)).toEqual({ events: ['a', 'b', 'c', 'd'] });
    expect(required(df.filter(col('b').gt(3)))).toEqual({ events: ['a', 'b', 'c', 'd'] });
    const timed = source('a string, b long, ts timestamp', 'timed');
    expect(required(timed.df.withWatermark('ts', '0 seconds').filter(col('b').gt(3)))).toEqual({ timed: ['a', 'b', 'ts'] });
  });

  it('withColumnRenamed passing every column to the sink needs them all (renamed or not)', () => {
    const { df } = source(EVENTS, 'events');
    expect(required(df.withColumnRenamed('a', 'alpha'))).toEqual({ events: ['a', 'b', 'c', 'd'] });
    expect(required(df.select('a', 'b').withColumnRenamed('a', 'alpha'))).toEqual({ events: ['a', 'b'] });
    expect(required(df.select('a', 'b').withColumnRenamed('a', 'alpha').filter(col('alpha').isNotNull()))).toEqual({ events: ['a', 'b'] });
  });

  it('withColumnRenamed, then a narrower use of the renamed column: only its source column (and the others used) are read', () => {
    const { df } = source(EVENTS, 'events');
    expect(required(df.withColumnRenamed('a', 'alpha').groupBy('alpha').agg(sum('c')))).toEqual({ events: ['a', 'c'] });
    expect(required(df.withColumnRenamed('a', 'alpha').select('alpha'))).toEqual({ events: ['a'] });
    expect(required(df.withColumnRenamed('a', 'alpha').select('alpha', 'c'))).toEqual({ events: ['a', 'c'] });
    // Renamed, then filtered on the new name and projected to another column.
    expect(required(df.withColumnRenamed('b', 'beta').filter(col('beta').gt(1)).select('d'))).toEqual({ events: ['b', 'd'] });
  });

  it('dropDuplicates on a subset passes all columns to the sink, so all columns are needed', () => {
    const { df } = source(EVENTS, 'events');
    expect(required(df.dropDuplicates(['a']))).toEqual({ events: ['a', 'b', 'c', 'd'] });
    expect(required(df.dropDuplicates())).toEqual({ events: ['a', 'b', 'c', 'd'] });
    // Projected afterwards: the key and the projected column, nothing else.
    expect(required(df.dropDuplicates(['a']).select('b'))).toEqual({ events: ['a', 'b'] });
  });

  it('a union of two sources: each source needs the columns its branch reads', () => {
    const left = source(EVENTS, 'left');
    const right = source('p string, q long, r long', 'right');
    expect(required(left.df.select('a', 'b').union(right.df.select('p', 'q')))).toEqual({ left: ['a', 'b'], right: ['p', 'q'] });
    // A union of whole rows needs every column of both.
    const sameShape = source(EVENTS, 'other');
    expect(required(left.df.union(sameShape.df))).toEqual({ left: ['a', 'b', 'c', 'd'], other: ['a', 'b', 'c', 'd'] });
  });

  it('a stream-static join with a condition: the stream needs the join key and the projected columns', () => {
    const { df } = source('id long, v long, w string, junk string', 'orders');
    const customers = new SluiceSession().createDataFrame([[1, 'ann', 'x']], 'cid long, name string, extra string');
    const q = df.join(customers, col('id').eq(col('cid')), 'inner').select('v', 'name');
    // The static side is not a streaming source: only the stream is listed.
    expect(required(q)).toEqual({ orders: ['id', 'v'] });
  });

  it('a stream-static join on a using column: the stream needs the key and what the select keeps', () => {
    const using = source('id long, v long, w string', 'orders2');
    const byName = new SluiceSession().createDataFrame([[1, 'ann']], 'id long, name string');
    expect(required(using.df.join(byName, 'id', 'left_outer').select('name'))).toEqual({ orders2: ['id'] });
  });

  it('a stream-stream join with a time-range condition: each side needs its key, event time and projected column', () => {
    const impressions = source('adId long, impTime timestamp, campaign string, junk1 string', 'impressions');
    const clicks = source('clickAdId long, clickTime timestamp, device string, junk2 string', 'clicks');
    const left = impressions.df.withWatermark('impTime', '10 seconds');
    const right = clicks.df.withWatermark('clickTime', '20 seconds');
    const condition = col('adId').eq(col('clickAdId'))
      .and(col('clickTime').geq(col('impTime')))
      .and(col('clickTime').leq(col('impTime').plus(expr({ kind: 'literal', value: 60_000_000, type: 'interval' }))));
    const q = left.join(right, condition, 'inner').select('campaign', 'device');
    expect(required(q)).toEqual({
      impressions: ['adId', 'campaign', 'impTime'],
      clicks: ['clickAdId', 'clickTime', 'device'],
    });
  });

  it('a self-join reads each column either side needs from the one source', () => {
    const { df } = source(EVENTS, 'events');
    const q = df.as('l').join(df.as('r'), col('l.a').eq(col('r.a')), 'inner').select(col('l.b'), col('r.d'));
    expect(required(q)).toEqual({ events: ['a', 'b', 'd'] });
  });

  it('a global count reads no column at all', () => {
    const { df } = source(EVENTS, 'events');
    expect(required(df.agg(count().as('n')))).toEqual({ events: [] });
    expect(required(df.agg(sum('c').as('s')))).toEqual({ events: ['c'] });
  });
});
