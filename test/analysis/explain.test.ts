import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { interval } from '../../lib/plan/column.js';
import { col, count, session_window, sum, timestamp_seconds, window } from '../../lib/plan/functions.js';
import { explainPlan } from '../../lib/analysis/explain.js';

const session = new SluiceSession();
const events = (): DataFrame => session.memoryStream('value int').df
  .withColumn('eventTime', timestamp_seconds('value'))
  .withWatermark('eventTime', '10 seconds');
const noConf = new Map<string, string>();

describe('explainPlan', () => {
  it('renders the logical plan as a tree with output columns, types and watermark marks', () => {
    const df = events().groupBy(window('eventTime', '5 seconds').as('window')).agg(count().as('count'))
      .select(col('window.start').cast('long').as('start'), 'count');
    const text = explainPlan(df.plan, 'append', noConf);
    const lines = text.split('\n');
    expect(lines[0]).toBe('== Logical plan ==');
    expect(lines[1]).toBe('Project [CAST(window.start AS LONG) AS start, count]');
    expect(text).toContain('+- Aggregate keys [window(eventTime, 5 seconds) AS window], aggregates [count(1) AS count]');
    expect(text).toContain('+- EventTimeWatermark eventTime, delay 10 seconds');
    expect(text).toContain('eventTime: timestamp [event time, watermark delay 10 seconds]');
    // Internal `#id` references from withColumn print as column names.
    expect(text).toContain('+- Project [value, timestamp_seconds(value) AS eventTime]');
    expect(text).toContain('StreamingRelation');
  });

  it('describes the stateful operators and their eviction under the output mode', () => {
    const agg = events().groupBy(window('eventTime', '5 seconds').as('window')).agg(count().as('count'));
    const append = explainPlan(agg.plan, 'append', noConf);
    expect(append).toContain('== Incremental plan (output mode: append) ==');
    expect(append).toContain('Watermark: eventTime with delay 10 seconds.');
    expect(append).toContain('1. Aggregation by [window(eventTime, 5 seconds) AS window]');
    expect(append).toContain('a group is emitted once, when the end of its window <= watermark, and then removed from state');
    expect(append).not.toContain('cannot start');

    const update = explainPlan(agg.plan, 'update', noConf);
    expect(update).toContain('a group is removed once the end of its window <= watermark');

    const complete = explainPlan(agg.plan, 'complete', noConf);
    expect(complete).toContain('every group is emitted every trigger and is never removed from state');
    expect(complete).toContain('complete mode ignores the watermark for eviction');
  });

  it('warns about state that grows forever', () => {
    const df = session.memoryStream('key string').df.dropDuplicates(['key']).groupBy('key').agg(count().as('n'));
    const text = explainPlan(df.plan, 'update', noConf);
    expect(text).toContain('Warnings:');
    expect(text).toContain('dropDuplicates on [key] has no event-time column in its key');
    expect(text).toContain('has no watermarked grouping key: its state grows forever');
  });

  it('explains how a time-range join bounds each side', () => {
    const left = session.memoryStream('leftKey int, time int').df
      .select('leftKey', timestamp_seconds('time').as('leftTime')).withWatermark('leftTime', '10 seconds');
    const right = session.memoryStream('rightKey int, time int').df
      .select('rightKey', timestamp_seconds('time').as('rightTime')).withWatermark('rightTime', '10 seconds');
    const range = col('leftTime').between(col('rightTime').minus(interval('5 seconds')), col('rightTime').plus(interval('5 seconds')));
    const text = explainPlan(left.join(right, col('leftKey').eq(col('rightKey')).and(range), 'left_outer').plan, 'append', noConf);
    expect(text).toContain('Join LeftOuter, ((leftKey = rightKey) AND (leftTime BETWEEN (rightTime - interval 5 seconds) AND (rightTime + interval 5 seconds)))');
    expect(text).toContain('Stream-stream LeftOuter join on [leftKey = rightKey]');
    expect(text).toContain('left rows are removed once leftTime < watermark(rightTime) - 5 seconds');
    expect(text).toContain('right rows are removed once rightTime < watermark(leftTime) - 5 seconds');
    expect(text).toContain('Unmatched left rows are emitted with NULLs when they are removed.');
    expect(text).toContain('the global watermark is the min of the per-input watermarks');
  });

  it('says why a query cannot start, with the Spark message and the fix', () => {
    const df = session.memoryStream('value int').df.groupBy('value').agg(count().as('count'));
    const text = explainPlan(df.plan, undefined, noConf);
    expect(text).toContain('== Incremental plan (output mode: append, the default) ==');
    expect(text).toContain('This query cannot start:');
    expect(text).toContain('Append output mode not supported when there are streaming aggregations on streaming DataFrames/DataSets without watermark');
    expect(text).toContain('How to fix: ');
    expect(explainPlan(df.plan, 'update', noConf)).not.toContain('cannot start');
  });

  it('reports the checks that only fail when the first batch is planned', () => {
    const df = events()
      .groupBy(session_window('eventTime', '5 seconds').as('session'))
      .agg(count().as('count'), sum('value').as('sum'));
    const text = explainPlan(df.plan, 'append', noConf);
    expect(text).toContain('This query will fail when its first batch is planned:');
    expect(text).toContain('Global aggregation with session window in streaming query is not supported.');
  });

  it('mentions a disabled correctness check instead of failing', () => {
    const chained = session.memoryStream('a int').df.groupBy().agg(count().as('d')).groupBy().agg(count().as('c'));
    const conf = new Map([['spark.sql.streaming.statefulOperator.checkCorrectness.enabled', 'false']]);
    const text = explainPlan(chained.plan, 'update', conf);
    expect(text).toContain('a stateful operator follows an aggregation in update mode');
    expect(text).not.toContain('cannot start');
    expect(explainPlan(chained.plan, 'update', noConf)).toContain("Detected pattern of possible 'correctness' issue");
  });

  it('shows only the logical plan for a batch query, and is what DataFrame.explain returns', () => {
    const df = session.createDataFrame([[1], [2]], 'a int').filter(col('a').gt(1));
    const text = explainPlan(df.plan, undefined, noConf);
    expect(text).toContain('Filter (a > 1)');
    expect(text).toContain('LocalRelation (static, 2 rows)');
    expect(text).not.toContain('Incremental plan');
    expect(df.explain()).toBe(text);
  });
});
