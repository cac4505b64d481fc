/**
 * Restarting a query on an existing checkpoint: changes that alter what the stored state and
 * offsets mean are refused at start() with a message naming the change; stateless changes proceed
 * and keep the state.
 */
import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { AnalysisError } from '../../lib/errors/sluice-error.js';
import type { OutputMode } from '../../lib/core/output-mode.js';
import { col, max, sum } from '../../lib/plan/functions.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';

function setup() {
  const { stream, df } = new SluiceSession().memoryStream('k string, k2 string, v long');
  const checkpoint = new MemoryCheckpoint();
  const sink = new MemorySink();
  const start = (query: DataFrame, mode: OutputMode = 'update') => query.writeStream.outputMode(mode).sink(sink).checkpoint(checkpoint).start();
  const original = df.groupBy(col('k')).agg(sum('v').as('total'));
  return { stream, df, checkpoint, sink, start, original };
}

/** Starts the original query, runs one batch and stops it, leaving state and offsets behind. */
async function runOnce(s: ReturnType<typeof setup>): Promise<void> {
  const query = await s.start(s.original);
  s.stream.addData([['a', 'x', 1], ['a', 'y', 2], ['b', 'x', 10]]);
  await query.processAllAvailable();
  await query.stop();
  expect(sortedRows(s.sink.allRows())).toEqual([['a', 3], ['b', 10]]);
}

const sortedRows = (rows: readonly (readonly unknown[])[]): unknown[][] => rows.map((r) => [...r]).sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y)));

async function refusal(promise: Promise<unknown>): Promise<AnalysisError> {
  const error = await promise.then(() => null, (e: unknown) => e);
  if (error === null) throw new Error('expected start() to refuse the checkpoint, but the query started');
  expect(error).toBeInstanceOf(AnalysisError);
  expect((error as AnalysisError).code).toBe('INCOMPATIBLE_CHECKPOINT');
  return error as AnalysisError;
}

describe('restarting on an existing checkpoint', () => {
  it('the unchanged query resumes with its state', async () => {
    const s = setup();
    await runOnce(s);
    const query = await s.start(s.original);
    s.stream.addData([['a', 'z', 5]]);
    await query.processAllAvailable();
    await query.stop();
    expect(s.sink.lastBatch()?.rows.map((r) => [...r])).toEqual([['a', 8]]);
  });

  it('refuses a changed output mode, naming both modes', async () => {
    const s = setup();
    await runOnce(s);
    const error = await refusal(s.start(s.original, 'complete'));
    expect(error.message).toMatch(/not compatible with its checkpoint/);
    expect(error.message).toMatch(/output mode changed from update to complete/);
    expect(error.message).toMatch(/How to fix: .*new checkpoint/);
  });

  it('refuses a changed grouping key, naming the old and new key', async () => {
    const s = setup();
    await runOnce(s);
    const error = await refusal(s.start(s.df.groupBy(col('k2')).agg(sum('v').as('total'))));
    expect(error.message).toMatch(/operator 0 \(\w+\): state keys changed from \[k:string\] to \[k2:string\]/);
    expect(error.message).not.toMatch(/aggregates changed/);
    expect(error.message).not.toMatch(/output mode/);
  });

  it('refuses an added grouping key', async () => {
    const s = setup();
    await runOnce(s);
    const error = await refusal(s.start(s.df.groupBy(col('k'), col('k2')).agg(sum('v').as('total'))));
    expect(error.message).toMatch(/state keys changed from \[k:string\] to \[k:string, k2:string\]/);
  });

  it('refuses a changed aggregate function, naming the old and new one', async () => {
    const s = setup();
    await runOnce(s);
    const error = await refusal(s.start(s.df.groupBy(col('k')).agg(max('v').as('total'))));
    expect(error.message).toMatch(/operator 0 \(\w+\): aggregates changed from \[sum\(v\)\] to \[max\(v\)\]/);
  });

  it('refuses an added aggregate', async () => {
    const s = setup();
    await runOnce(s);
    const error = await refusal(s.start(s.df.groupBy(col('k')).agg(sum('v').as('total'), max('v').as('top'))));
    expect(error.message).toMatch(/aggregates changed from \[sum\(v\)\] to \[sum\(v\), max\(v\)\]/);
  });

  it('accepts a renamed aggregate column: the state means the same, as in Spark', async () => {
    const s = setup();
    await runOnce(s);
    const query = await s.start(s.df.groupBy(col('k')).agg(sum('v').as('renamed_total')));
    await query.stop();
  });

  it('refuses a query that lost its stateful operator', async () => {
    const s = setup();
    await runOnce(s);
    const error = await refusal(s.start(s.df.filter(col('v').gt(0)), 'append'));
    expect(error.message).toMatch(/number of stateful operators changed from 1 to 0/);
  });

  it('a refused restart leaves the checkpoint usable by the original query', async () => {
    const s = setup();
    await runOnce(s);
    await refusal(s.start(s.original, 'complete'));
    await refusal(s.start(s.df.groupBy(col('k2')).agg(sum('v').as('total'))));
    const query = await s.start(s.original);
    s.stream.addData([['b', 'x', 1]]);
    await query.processAllAvailable();
    await query.stop();
    expect(s.sink.lastBatch()?.rows.map((r) => [...r])).toEqual([['b', 11]]);
  });

  it('proceeds with an added stateless filter before the aggregation, keeping the state', async () => {
    const s = setup();
    await runOnce(s);
    const filtered = s.df.filter(col('v').lt(100)).groupBy(col('k')).agg(sum('v').as('total'));
    const query = await s.start(filtered);
    s.stream.addData([['a', 'x', 4], ['a', 'x', 1000], ['c', 'x', 7]]);
    await query.processAllAvailable();
    await query.stop();
    // 'a' continues from the stored 3 (the 1000 row is filtered out): the state survived the change.
    expect(sortedRows(s.sink.lastBatch()?.rows ?? [])).toEqual([['a', 7], ['c', 7]]);
  });

  it('proceeds with an added stateless projection after the aggregation', async () => {
    const s = setup();
    await runOnce(s);
    const projected = s.original.select(col('k'), col('total'), col('total').multiply(2).as('double'));
    const query = await s.start(projected);
    s.stream.addData([['b', 'x', 5]]);
    await query.processAllAvailable();
    await query.stop();
    expect(s.sink.lastBatch()?.rows.map((r) => [...r])).toEqual([['b', 15, 30]]);
  });
});
