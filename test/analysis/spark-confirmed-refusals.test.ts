/**
 * Refusals whose message, error class and phase were checked against PySpark 4.0.1 by the spark-diff
 * harness (test/spark-diff/cases/refusals.json): the phase is where Spark raises them — definition
 * (eager analysis of the DataFrame), start() (UnsupportedOperationChecker), or a failed batch.
 */
import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { col, count, session_window, window } from '../../lib/plan/functions.js';
import { AnalysisError, IllegalArgumentError } from '../../lib/errors/sluice-error.js';
import { checkRuntimeRestrictions } from '../../lib/analysis/unsupported-operation-checker.js';

const stream = (): DataFrame => new SluiceSession().memoryStream('k string, ts timestamp, v long').df;

async function startError(df: DataFrame, mode: 'append' | 'update' = 'append'): Promise<AnalysisError> {
  let query;
  try {
    query = await df.writeStream.outputMode(mode).foreachBatch(() => undefined).checkpoint(new MemoryCheckpoint()).start();
  } catch (error) {
    expect(error).toBeInstanceOf(AnalysisError);
    return error as AnalysisError;
  }
  await query.stop();
  throw new Error('expected start() to refuse the query');
}

describe('refusals as PySpark 4.0.1 raises them', () => {
  it('sample() on a stream is refused at start(), with Spark\'s message', async () => {
    const sampled = stream().sample(0.5, 1); // defining it is allowed, as in Spark
    const e = await startError(sampled);
    expect(e.message).toContain('Sampling is not supported on streaming DataFrames/Datasets');
    expect(e.errorClass).toBe('_LEGACY_ERROR_TEMP_3102');
  });

  it('sample() on a static DataFrame says Sluice has no sampler, and checks the fraction', () => {
    const session = new SluiceSession();
    const df = session.createDataFrame([[1]], [{ name: 'a', type: 'int' }]);
    expect(() => df.sample(0.5)).toThrow(/sample\(\) is not supported by Sluice/);
    expect(() => stream().sample(1.5)).toThrow(IllegalArgumentError);
  });

  it('two window() expressions in one aggregation are refused when the DataFrame is defined', () => {
    const df = stream();
    let error: unknown;
    try {
      df.groupBy(window(col('ts'), '10 seconds').alias('w1'), window(col('ts'), '20 seconds').alias('w2')).agg(count('*'));
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(AnalysisError);
    expect((error as AnalysisError).message).toContain('Multiple time/session window expressions would result in a cartesian product of rows');
    expect((error as AnalysisError).errorClass).toBe('_LEGACY_ERROR_TEMP_1039');
  });

  it('a window() and a session_window() in one select are refused too; one window written twice is not', () => {
    const df = stream();
    expect(() => df.select(window(col('ts'), '10 seconds'), session_window(col('ts'), '5 seconds'))).toThrow(/cartesian product/);
    const w = window(col('ts'), '10 seconds');
    expect(() => df.withWatermark('ts', '1 second').groupBy(w.alias('window'), col('k')).agg(count('*'))).not.toThrow();
  });

  it('dropDuplicatesWithinWatermark without a watermark is refused at start(), not when defined', async () => {
    const deduped = stream().dropDuplicatesWithinWatermark(['k']);
    const e = await startError(deduped);
    expect(e.message).toContain('dropDuplicatesWithinWatermark is not supported on streaming DataFrames/DataSets without watermark');
    expect(e.errorClass).toBe('_LEGACY_ERROR_TEMP_3102');
  });
});

describe('a stateful operator keyed by two event-time columns (Spark fails the first batch)', () => {
  const joined = (): DataFrame => {
    const session = new SluiceSession();
    const l = session.memoryStream('lk string, lts timestamp').df.withWatermark('lts', '10 seconds');
    const r = session.memoryStream('rk string, rts timestamp').df.withWatermark('rts', '10 seconds');
    return l.join(r, col('lk').eq(col('rk')).and(col('rts').eq(col('lts'))), 'inner').select(col('lk'), col('lts'), col('rts'));
  };

  it('dropDuplicates() over a join keeping both event times fails at run time with Spark\'s message', () => {
    const e = (() => {
      try {
        checkRuntimeRestrictions(joined().dropDuplicates().plan, new Map());
      } catch (error) {
        return error as AnalysisError;
      }
      throw new Error('expected a refusal');
    })();
    expect(e.message).toContain('More than one event time columns are available. Please ensure there is at most one event time column per stream.');
    expect(e.message).toContain('(lts-T10000ms,rts-T10000ms)');
  });

  it('one event-time key is fine, and the compatibility conf (allowMultiple=false) does not refuse it', () => {
    expect(() => checkRuntimeRestrictions(joined().dropDuplicates(['lk', 'lts']).plan, new Map())).not.toThrow();
    const conf = new Map([['spark.sql.streaming.statefulOperator.allowMultiple', 'false']]);
    expect(() => checkRuntimeRestrictions(joined().dropDuplicates().plan, conf)).not.toThrow();
  });
});
