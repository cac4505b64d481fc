import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { interval } from '../../lib/plan/column.js';
import { col, count, countDistinct, lit, monotonically_increasing_id, session_window, sum, timestamp_seconds, window } from '../../lib/plan/functions.js';
import type { LogicalPlan } from '../../lib/plan/logical-plan.js';
import { AnalysisError } from '../../lib/errors/sluice-error.js';
import {
  checkBatchQuery, checkRuntimeRestrictions, checkStreamingQuery, checkStreamingQueryGlobalWatermarkLimit,
  findGlobalWatermarkCorrectnessIssue,
} from '../../lib/analysis/unsupported-operation-checker.js';
import type { OutputMode } from '../../lib/core/output-mode.js';
import { buildInputs, buildQuery, type Json } from '../conformance/scenario-query.js';

type Conf = Record<string, string>;
const GENERIC = ['streaming', 'DataFrame', 'Dataset', 'not supported'];

function analysisError(fn: () => void): AnalysisError {
  try {
    fn();
  } catch (e) {
    if (e instanceof AnalysisError) return e;
    throw e;
  }
  throw new Error('expected an AnalysisError, but nothing was thrown');
}

function expectContains(message: string, substrings: readonly string[]): void {
  for (const s of substrings) expect(message.toLowerCase(), `message should contain '${s}'`).toContain(s.toLowerCase());
}

/** Spark's assertNotSupportedInStreamingPlan: the given substrings plus the generic ones, any case. */
function refused(df: DataFrame, mode: OutputMode, substrings: string[], conf: Conf = {}, generic = true): AnalysisError {
  const e = analysisError(() => checkStreamingQuery(df.plan, mode, new Map(Object.entries(conf))));
  expectContains(e.message, generic ? [...substrings, ...GENERIC] : substrings);
  expect(e.code).toBeTruthy();
  expect(e.errorClass).toBeTruthy();
  expect(e.hint).toBeTruthy();
  return e;
}

function supported(df: DataFrame, mode: OutputMode, conf: Conf = {}): void {
  expect(() => checkStreamingQuery(df.plan, mode, new Map(Object.entries(conf)))).not.toThrow();
}

function runtimeRefused(df: DataFrame, substrings: string[], conf: Conf = {}): AnalysisError {
  const e = analysisError(() => checkRuntimeRestrictions(df.plan, new Map(Object.entries(conf))));
  expectContains(e.message, substrings);
  expect(e.hint).toBeTruthy();
  return e;
}

const session = new SluiceSession();
const stream = (schema = 'a int'): DataFrame => session.memoryStream(schema).df;
const batch = (schema = 'a int'): DataFrame => session.createDataFrame([], schema);
/** The suite's relation with watermark metadata on `a` (1000 ms). */
const watermarked = (name = 'a'): DataFrame => stream(`${name} timestamp`).withWatermark(name, '1 second');

describe('validation scenarios (UnsupportedOperationsSuite and friends)', () => {
  it('refuses a query without streaming source', () => {
    refused(batch().select('a'), 'append', ['without streaming source', 'start'], {}, false);
  });

  it('append mode: aggregation without watermark is refused, with the 4.x error class', () => {
    const e = refused(stream().groupBy().agg(count().as('d')), 'append', ['streaming aggregations', 'without watermark']);
    expect(e.errorClass).toBe('STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION');
    expect(e.message).toContain('Append output mode not supported when there are streaming aggregations on streaming DataFrames/DataSets without watermark');
    refused(stream('value int').groupBy('value').agg(count().as('count(1)')), 'append', ['append', 'not supported'], {}, false);
  });

  it('append mode: aggregation on a watermarked key or window is supported', () => {
    supported(watermarked().groupBy('a').agg(count().as('d')), 'append');
    supported(watermarked().groupBy(window('a', '5 seconds')).agg(count().as('d')), 'append');
    supported(watermarked().select(window('a', '5 seconds').as('w')).groupBy('w').agg(count().as('d')), 'append');
  });

  it('append mode without aggregation is supported; update too', () => {
    supported(stream().filter(col('a').gt(1)), 'append');
    supported(stream().filter(col('a').gt(1)), 'update');
  });

  it('complete mode needs an aggregation', () => {
    const e = refused(stream().filter(col('a').gt(1)), 'complete', ['no streaming aggregations']);
    expect(e.errorClass).toBe('STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION');
    supported(stream().groupBy().agg(count().as('d')), 'complete');
    supported(stream().groupBy().agg(count().as('d')), 'update');
  });

  it('dedup before an aggregation on the watermarked key is supported in append mode', () => {
    supported(watermarked().dropDuplicates(['a']).groupBy('a').agg(count().as('c')), 'append');
  });

  it('except with a streaming side is refused (master), on either side', () => {
    refused(stream().except(batch()), 'append', ['except']);
    refused(batch().except(stream()), 'append', ['except']);
    refused(stream().except(stream()), 'append', ['except']);
    refused(stream().except(batch(), true), 'append', ['except']);
  });

  it('intersect with a streaming side is refused', () => {
    refused(stream().intersect(stream()), 'append', ['intersect']);
    refused(stream().intersect(batch()), 'append', ['intersect']);
    supported(stream().join(batch().intersect(batch()), null, 'inner'), 'append');
  });

  it('stream-static outer joins: only the stream may be the preserved side', () => {
    refused(stream().join(batch(), null, 'full_outer'), 'append', ['FullOuter join']);
    refused(batch().join(stream(), null, 'full_outer'), 'append', ['FullOuter join']);
    refused(batch().join(stream(), null, 'left_outer'), 'append', ['LeftOuter join']);
    supported(stream().join(batch(), null, 'left_outer'), 'append');
    refused(stream().join(batch(), null, 'right_outer'), 'append', ['RightOuter join']);
    supported(batch().join(stream(), null, 'right_outer'), 'append');
    refused(batch().join(stream(), null, 'left_semi'), 'append', ['LeftSemi join']);
    supported(stream().join(batch(), null, 'left_semi'), 'append');
    refused(batch().join(stream(), null, 'left_anti'), 'append', ['LeftAnti join']);
    refused(stream().join(stream(), null, 'left_anti'), 'append', ['LeftAnti join']);
    supported(stream().join(batch(), null, 'left_anti'), 'append');
  });

  it('stream-stream inner join: append and update (master), not complete', () => {
    supported(stream().join(stream(), null, 'inner'), 'append');
    supported(stream().join(stream(), null, 'inner'), 'update');
    const joined = stream().join(stream(), null, 'inner').groupBy().agg(count().as('d'));
    refused(joined, 'complete', ['is not supported in Complete output mode', 'only in Append and Update output modes']);
  });

  it('stream-stream outer joins need a watermarked join key...', () => {
    const L = (): DataFrame => watermarked().as('L');
    const R = (): DataFrame => stream('a timestamp').as('R');
    for (const how of ['left_outer', 'right_outer', 'full_outer', 'left_semi'] as const) {
      supported(L().join(R(), col('L.a').eq(col('R.a')), how), 'append');
      supported(R().join(L(), col('R.a').eq(col('L.a')), how), 'append');
      const plain = stream('a timestamp').as('L').join(R(), col('L.a').eq(col('R.a')), how);
      refused(plain, 'append', ['without a watermark in the join keys']);
    }
  });

  it('...or a watermark on the nullable side and a range condition bounding the preserved side', () => {
    const s1 = (): DataFrame => stream('a timestamp');
    const s2 = (): DataFrame => watermarked('b');
    supported(s1().join(s2(), col('a').gt(col('b').plus(interval('10 seconds'))), 'left_outer'), 'append');
    supported(s1().join(s2(), col('a').gt(col('b').plus(interval('10 seconds'))), 'left_semi'), 'append');
    supported(s2().join(s1(), col('a').gt(col('b').plus(interval('10 seconds'))), 'right_outer'), 'append');
    supported(s1().join(s2(), col('a').gt(col('b').plus(interval('10 seconds'))), 'full_outer'), 'append');
    const message = 'is not supported without a watermark in the join keys, or a watermark on the nullable side and an appropriate range condition';
    refused(s1().join(s2(), col('a').lt(col('b').plus(interval('10 seconds'))), 'left_outer'), 'append', [message]);
    refused(s2().join(s1(), col('a').lt(col('b').plus(interval('10 seconds'))), 'right_outer'), 'append', [message]);
    refused(s1().join(s2(), col('a').lt(col('b').plus(interval('10 seconds'))), 'left_semi'), 'append', [message]);
  });

  it('stream-stream outer joins are append-only; inner and left semi also run in update mode', () => {
    const outer = (how: 'left_outer' | 'right_outer' | 'full_outer'): DataFrame =>
      stream('a timestamp').as('L').join(stream('a timestamp').as('R'), col('L.a').eq(col('R.a')), how);
    for (const how of ['left_outer', 'right_outer', 'full_outer'] as const) {
      refused(outer(how), 'update', ['is not supported in Update output mode', 'only in Append output mode']);
      refused(outer(how).groupBy().agg(count().as('d')), 'complete', ['is not supported in Complete output mode', 'only in Append output mode']);
    }
    supported(watermarked().as('L').join(stream('a timestamp').as('R'), col('L.a').eq(col('R.a')), 'left_semi'), 'update');
  });

  it('chained stateful operators in update/complete mode fail the global watermark check', () => {
    const twoAggs = stream().groupBy().agg(count().as('d')).groupBy().agg(count().as('c'));
    const conf = { 'spark.sql.streaming.statefulOperator.checkCorrectness.enabled': 'true' };
    refused(twoAggs, 'update', ["Detected pattern of possible 'correctness' issue"], conf, false);
    refused(twoAggs, 'complete', ["Detected pattern of possible 'correctness' issue"], {}, false);
    // The check alone (scope globalWatermarkLimitCheck): append passes it; disabling it lets update start.
    expect(() => checkStreamingQueryGlobalWatermarkLimit(twoAggs.plan, 'append', new Map())).not.toThrow();
    supported(twoAggs, 'update', { 'spark.sql.streaming.statefulOperator.checkCorrectness.enabled': 'false' });
  });

  it('refuses non-time window functions on streams', () => {
    const e = refused(stream().withWindowFunction('rn', 'row_number', [], []), 'append', ['window']);
    expect(e.errorClass).toBe('NON_TIME_WINDOW_NOT_SUPPORTED_IN_STREAMING');
    expect(e.message).toContain('Window function is not supported in ROW_NUMBER() (as column `rn`) on streaming DataFrames/Datasets');
    supported(stream().join(batch().withWindowFunction('rn', 'row_number', ['a'], ['a']), null, 'inner'), 'append');
  });

  it('refuses session windows in update mode', () => {
    const sessions = (): DataFrame => stream('value string, ts long')
      .withColumn('eventTime', col('ts').cast('timestamp'))
      .withWatermark('eventTime', '30 seconds');
    refused(sessions().groupBy(session_window('eventTime', '10 seconds').as('session'), 'value').agg(count().as('n')), 'update',
      ['Update output mode', 'not supported', 'for session window'], {}, false);
    refused(sessions().groupBy(session_window('eventTime', '10 seconds').as('session')).agg(count().as('n')), 'update',
      ['for session window'], {}, false);
    supported(sessions().groupBy(session_window('eventTime', '10 seconds').as('session'), 'value').agg(count().as('n')), 'append');
    supported(sessions().groupBy(session_window('eventTime', '10 seconds').as('session'), 'value').agg(count().as('n')), 'complete');
  });

  it('sorts only on aggregated data in complete mode', () => {
    const sortedAgg = stream().groupBy().agg(count().as('d')).orderBy('d');
    supported(sortedAgg, 'complete');
    refused(sortedAgg, 'update', ['sort', 'aggregat', 'complete']);
    refused(stream().orderBy('a').groupBy().agg(count().as('d')), 'complete', ['sort', 'aggregat', 'complete']);
    refused(stream().orderBy('a'), 'append', ['sort']);
    supported(stream().join(batch().orderBy('a'), null, 'inner'), 'append');
  });

  it('union of a stream with a static DataFrame is refused; stream with stream is fine', () => {
    refused(stream().union(batch()), 'append', ['union']);
    supported(stream().union(stream()), 'append');
  });

  it('refuses distinct aggregates on streams only', () => {
    refused(stream().groupBy().agg(countDistinct('a').as('c')), 'complete', ['distinct aggregation']);
    supported(stream().join(batch().groupBy().agg(countDistinct('a').as('c')), null, 'inner'), 'append');
  });

  it('refuses monotonically_increasing_id on streams', () => {
    refused(stream().select(monotonically_increasing_id().as('id')), 'append', ['monotonically_increasing_id']);
  });

  it('accepts a batch aggregation joined to a stream in any mode (only streaming aggregations count)', () => {
    const batchAgg = batch().groupBy().agg(count().as('c'));
    supported(stream().join(batchAgg, null, 'inner'), 'append');
    supported(batchAgg.join(stream().groupBy().agg(count().as('d')), null, 'inner'), 'update');
  });

  it('refuses dropDuplicatesWithinWatermark without a watermark (plan built directly: the API refuses earlier)', () => {
    const child = stream().plan;
    const plan: LogicalPlan = { kind: 'Deduplicate', child, keys: [...child.output], withinWatermark: true, output: child.output };
    const e = analysisError(() => checkStreamingQuery(plan, 'append', new Map()));
    expect(e.message).toContain('dropDuplicatesWithinWatermark is not supported on streaming DataFrames/DataSets without watermark');
  });
});

describe('global watermark correctness check (chained stateful operators)', () => {
  const none = new Map<string, string>();
  const aggThen = (): DataFrame => watermarked().groupBy('a').agg(count().as('c'));

  it('flags dedup with event time after an update/complete aggregation, not dedup without', () => {
    for (const mode of ['update', 'complete'] as const) {
      expect(findGlobalWatermarkCorrectnessIssue(aggThen().dropDuplicates(['a']).plan, mode)).not.toBeNull();
      expect(findGlobalWatermarkCorrectnessIssue(aggThen().dropDuplicates(['c']).plan, mode)).toBeNull();
    }
    expect(findGlobalWatermarkCorrectnessIssue(aggThen().dropDuplicates(['a']).plan, 'append')).toBeNull();
  });

  it('passes joins and aggregations chained in append mode', () => {
    const joined = watermarked().as('L').join(stream('a timestamp').as('R'), col('L.a').eq(col('R.a')), 'inner');
    expect(() => checkStreamingQueryGlobalWatermarkLimit(joined.groupBy('L.a').agg(count().as('n')).plan, 'append', none)).not.toThrow();
    const chained = watermarked().groupBy(window('a', '5 seconds').as('w')).agg(count().as('n')).groupBy('w').agg(count().as('m'));
    expect(() => checkStreamingQueryGlobalWatermarkLimit(chained.plan, 'append', none)).not.toThrow();
  });

  it('flags a stream-stream join of two update-mode aggregations', () => {
    const left = stream().groupBy('a').agg(count().as('c')).as('L');
    const right = stream().groupBy('a').agg(count().as('c')).as('R');
    const plan = left.join(right, col('L.a').eq(col('R.a')), 'inner').plan;
    expect(() => checkStreamingQueryGlobalWatermarkLimit(plan, 'update', none)).toThrow(/Detected pattern of possible 'correctness' issue/);
    expect(() => checkStreamingQueryGlobalWatermarkLimit(plan, 'update', new Map([['spark.sql.streaming.statefulOperator.checkCorrectness.enabled', 'false']]))).not.toThrow();
  });
});

describe('runtime restrictions (raised when the first batch is planned)', () => {
  it('refuses redefining the watermark unless allowMultiple is false', () => {
    const df = stream('_1 long, _2 long')
      .withColumn('first', timestamp_seconds('_1'))
      .withColumn('second', timestamp_seconds('_2'))
      .withWatermark('first', '1 minute')
      .select('*')
      .withWatermark('second', '2 minutes')
      .groupBy(window('second', '1 minute'))
      .count();
    supported(df, 'append');
    const e = runtimeRefused(df, ['Redefining watermark is disallowed.', 'spark.sql.streaming.statefulOperator.allowMultiple']);
    expect(e.message).toContain("Note that multiple stateful operators will be disallowed.");
    expect(() => checkRuntimeRestrictions(df.plan, new Map([['spark.sql.streaming.statefulOperator.allowMultiple', 'false']]))).not.toThrow();
  });

  it('refuses a watermark above a stateful operator fed by another watermark, not watermarks on separate inputs', () => {
    const aggregated = watermarked().groupBy(window('a', '5 seconds').as('w')).agg(count().as('n'));
    runtimeRefused(aggregated.select(col('w.end').as('t'), 'n').withWatermark('t', '1 second'), ['Redefining watermark']);
    const union = watermarked().union(watermarked());
    expect(() => checkRuntimeRestrictions(union.plan, new Map())).not.toThrow();
  });

  it('refuses a stream-stream join without an equality predicate', () => {
    const left = stream('value int').select(col('value').as('leftKey'), col('value').multiply(2).as('leftValue'));
    const right = stream('value int').select(col('value').as('rightKey'), col('value').multiply(3).as('rightValue'));
    const joined = left.join(right, col('leftKey').lt(col('rightKey')));
    supported(joined, 'append');
    runtimeRefused(joined, ['Stream-stream join without equality predicate is not supported']);
    expect(() => checkRuntimeRestrictions(left.join(right, col('leftKey').eq(col('rightKey'))).plan, new Map())).not.toThrow();
    expect(() => checkRuntimeRestrictions(left.join(batch('k int'), col('leftKey').lt(col('k'))).plan, new Map())).not.toThrow();
  });

  it('refuses a global aggregation over a session window, in append and complete mode', () => {
    const df = stream('value int')
      .withColumn('eventTime', col('value').cast('timestamp'))
      .withWatermark('eventTime', '10 seconds')
      .groupBy(session_window('eventTime', '5 seconds').as('session'))
      .agg(count().as('count'), sum('value').as('sum'));
    supported(df, 'append');
    supported(df, 'complete');
    runtimeRefused(df, ['Global aggregation with session window', 'not supported']);
  });
});

describe('batch queries', () => {
  it('refuses streaming sources in a batch query', () => {
    const e = analysisError(() => checkBatchQuery(stream().select('a').plan));
    expect(e.message).toContain('Queries with streaming sources must be executed with writeStream.start()');
    expect(() => checkBatchQuery(batch().select(lit(1).as('x')).plan)).not.toThrow();
  });
});

// Every conformance scenario, through the project's scenario translator: validation scenarios must
// give their expected verdict, and every other streaming scenario must be accepted.
describe('conformance scenarios', () => {
  const dir = '/work/shared/conformance/scenarios';
  const scenarios: Json[] = readdirSync(dir).filter((f) => f.endsWith('.json')).map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')));

  function matches(error: Error, spec: Json): boolean {
    const alternatives: Json[] = spec.anyOf ? spec.anyOf.map((alt: Json) => ({ ...spec, ...alt })) : [spec];
    return alternatives.some((alt) => {
      const fold = (s: string): string => (alt.caseInsensitive ? s.toLowerCase() : s);
      const contains = (alt.messageContainsAll ?? []).every((s: string) => fold(error.message).includes(fold(s)));
      return contains && (!alt.errorClass || (error as AnalysisError).errorClass === alt.errorClass);
    });
  }

  for (const scenario of scenarios.filter((s) => s.execution !== 'batch')) {
    it(scenario.id, () => {
      const conf = new Map<string, string>(Object.entries(scenario.conf ?? {}));
      const steps: Json[] = scenario.steps;
      const failure = steps.find((s) => s.expectFailure)?.expectFailure;
      const build = (): DataFrame => buildQuery(scenario.query, buildInputs(scenario, scenario.conf ?? {}));
      if (failure?.phase === 'definition') {
        let thrown: unknown = null;
        try {
          build();
        } catch (e) {
          thrown = e;
        }
        expect(thrown).toBeInstanceOf(Error);
        expect(matches(thrown as Error, failure), (thrown as Error).message).toBe(true);
        return;
      }
      const plan = build().plan;
      const mode = scenario.outputMode as OutputMode;
      if (failure?.phase === 'analysis') {
        const run = failure.scope === 'globalWatermarkLimitCheck'
          ? () => checkStreamingQueryGlobalWatermarkLimit(plan, mode, conf)
          : () => checkStreamingQuery(plan, mode, conf);
        const e = analysisError(run);
        expect(matches(e, failure), e.message).toBe(true);
      } else if (failure?.phase === 'runtime') {
        checkStreamingQuery(plan, mode, conf);
        const e = analysisError(() => checkRuntimeRestrictions(plan, conf));
        expect(matches(e, failure), e.message).toBe(true);
      } else if (scenario.category === 'validation') {
        // expectSupported: starting must not raise a validation error (a runtime one may follow).
        const scope = steps.find((s) => s.expectSupported)?.expectSupported?.scope;
        if (scope === 'globalWatermarkLimitCheck') checkStreamingQueryGlobalWatermarkLimit(plan, mode, conf);
        else checkStreamingQuery(plan, mode, conf);
      } else {
        checkStreamingQuery(plan, mode, conf);
        checkRuntimeRestrictions(plan, conf);
      }
    });
  }
});
