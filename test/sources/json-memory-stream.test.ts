/**
 * JsonMemoryStream: raw JSON records decoded by the engine with the schema, one offset per
 * addData; undecodable records are kept aside (with offset, record and reason) and counted in the
 * batch's progress (numDeadLetteredRows); only the columns the query reads are decoded.
 */
import { describe, expect, it, vi } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import type { OutputMode } from '../../lib/core/output-mode.js';
import { col, sum, window } from '../../lib/plan/functions.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { JsonMemoryStream } from '../../lib/sources/json-memory-stream.js';
import type { StreamingQuery } from '../../lib/runtime/streaming-query.js';

const SCHEMA = 'k string, v long, extra long';
const sorted = (rows: readonly (readonly unknown[])[]): unknown[][] =>
  rows.map((r) => [...r]).sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y)));

function setup(schema = SCHEMA) {
  const { stream, df } = new SluiceSession().jsonMemoryStream(schema);
  const sink = new MemorySink();
  const checkpoint = new MemoryCheckpoint();
  const start = (query: DataFrame, mode: OutputMode = 'append'): Promise<StreamingQuery> =>
    query.writeStream.outputMode(mode).sink(sink).checkpoint(checkpoint).start();
  return { stream, df, sink, checkpoint, start };
}

const rec = (o: Record<string, unknown>): string => JSON.stringify(o);

describe('JsonMemoryStream: offsets and decoding', () => {
  it('is created by the session with the parsed schema, and is a JsonMemoryStream', () => {
    const { stream, df } = new SluiceSession().jsonMemoryStream('k string, v long, ts timestamp');
    expect(stream).toBeInstanceOf(JsonMemoryStream);
    expect(stream.schema).toEqual([{ name: 'k', type: 'string' }, { name: 'v', type: 'long' }, { name: 'ts', type: 'timestamp' }]);
    expect(df.columns).toEqual(['k', 'v', 'ts']);
    expect(df.isStreaming).toBe(true);
  });

  it('each addData call is one offset (1-based), and getBatch decodes the records of (start, end]', () => {
    const stream = new JsonMemoryStream([{ name: 'k', type: 'string' }, { name: 'v', type: 'long' }]);
    expect(stream.latestOffset()).toBeNull();
    expect(stream.addData([rec({ k: 'a', v: 1 }), rec({ k: 'b', v: 2 })])).toBe(1);
    expect(stream.addData([])).toBe(2);
    expect(stream.addData([rec({ v: 3, k: 'c' })])).toBe(3);
    expect(stream.latestOffset()).toBe(3);
    expect(stream.getBatch(null, 1)).toEqual([['a', 1], ['b', 2]]);
    expect(stream.getBatch(1, 2)).toEqual([]);
    expect(stream.getBatch(1, 3)).toEqual([['c', 3]]);
    expect(stream.getBatch(null, 3)).toEqual([['a', 1], ['b', 2], ['c', 3]]);
  });

  it('refuses a record that is not JSON text, before adding anything, and says what to pass', () => {
    const { stream } = new SluiceSession().jsonMemoryStream('k string');
    expect(() => stream.addData(['{"k":"a"}', { k: 'b' } as unknown as string])).toThrow(/record 1 is object.*JSON\.stringify/s);
    expect(stream.latestOffset()).toBeNull();
  });

  it('keeps the records as given: mutating the caller array afterwards changes nothing', () => {
    const stream = new JsonMemoryStream([{ name: 'k', type: 'string' }]);
    const records = [rec({ k: 'a' })];
    stream.addData(records);
    records[0] = rec({ k: 'mutated' });
    records.push(rec({ k: 'added' }));
    expect(stream.getBatch(null, 1)).toEqual([['a']]);
  });

  it('through the engine: one batch per addData, rows decoded with the schema (missing fields NULL, timestamps as µs)', async () => {
    const s = setup('k string, v long, d double, ok boolean, ts timestamp');
    const query = await s.start(s.df);
    expect(s.stream.addData([
      rec({ k: 'a', v: 1, d: 1.5, ok: true, ts: '2024-05-01T00:00:00Z' }),
      rec({ v: 2, k: 'b' }),
    ])).toBe(1);
    await query.processAllAvailable();
    expect(s.sink.latestBatchId).toBe(0);
    const t = Date.parse('2024-05-01T00:00:00Z') * 1000;
    expect(s.sink.lastBatch()!.rows.map((r) => [...r])).toEqual([['a', 1, 1.5, true, t], ['b', 2, null, null, null]]);
    expect(query.lastProgress?.sources[0]).toMatchObject({ startOffset: null, endOffset: 1, numInputRows: 2 });

    expect(s.stream.addData([rec({ k: 'c', v: 3, ts: 60 })])).toBe(2);
    await query.processAllAvailable();
    expect(s.sink.latestBatchId).toBe(1);
    expect(s.sink.lastBatch()!.rows.map((r) => [...r])).toEqual([['c', 3, null, null, 60_000_000]]);
    expect(query.lastProgress?.sources[0]).toMatchObject({ startOffset: 1, endOffset: 2, numInputRows: 1 });
    expect(query.lastProgress?.numDeadLetteredRows).toBe(0);
    expect(s.stream.invalidRecords).toEqual([]);
    await query.stop();
  });
});

describe('JsonMemoryStream: undecodable records', () => {
  const malformed = '{"k": "a", "v": ';
  const wrongType = rec({ k: 'b', v: 'seven', extra: 1 });
  const notObjectArray = '[1, 2]';
  const notObjectString = '"just a string"';
  const notObjectNull = 'null';
  const good1 = rec({ k: 'a', v: 1, extra: 10 });
  const good2 = rec({ k: 'c', v: 3 });

  it('are left out of the output, counted in progress and listed with offset, record and reason', async () => {
    const s = setup();
    const query = await s.start(s.df);
    s.stream.addData([good1, malformed, wrongType, notObjectArray, good2, notObjectString, notObjectNull]);
    await query.processAllAvailable();
    expect(sorted(s.sink.allRows())).toEqual([['a', 1, 10], ['c', 3, null]]);
    expect(query.lastProgress?.numInputRows).toBe(2);
    expect(query.lastProgress?.numDeadLetteredRows).toBe(5);

    const invalid = s.stream.invalidRecords;
    expect(invalid.map((r) => r.record)).toEqual([malformed, wrongType, notObjectArray, notObjectString, notObjectNull]);
    expect(invalid.every((r) => r.offset === 1)).toBe(true);
    const reasonOf = (record: string): string => invalid.find((r) => r.record === record)!.reason;
    expect(reasonOf(malformed)).toMatch(/malformed JSON/);
    expect(reasonOf(wrongType)).toMatch(/field 'v'/);
    expect(reasonOf(wrongType)).toMatch(/long/);
    expect(reasonOf(notObjectArray)).toMatch(/not a JSON object/);
    expect(reasonOf(notObjectString)).toMatch(/not a JSON object/);
    expect(reasonOf(notObjectNull)).toMatch(/not a JSON object/);

    // The next batch counts only its own invalid records; the list grows with offset 2.
    const outOfRange = rec({ k: 'd', v: 1.5 });
    s.stream.addData([rec({ k: 'd', v: 4 }), outOfRange]);
    await query.processAllAvailable();
    expect(s.sink.lastBatch()!.rows.map((r) => [...r])).toEqual([['d', 4, null]]);
    expect(query.lastProgress?.numDeadLetteredRows).toBe(1);
    expect(query.lastProgress?.numInputRows).toBe(1);
    expect(s.stream.invalidRecords).toHaveLength(6);
    expect(s.stream.invalidRecords[5]).toMatchObject({ offset: 2, record: outOfRange });
    expect(s.stream.invalidRecords[5]!.reason).toMatch(/field 'v'/);
    await query.stop();
  });

  it('a batch of only invalid records still runs: no rows, every record counted', async () => {
    const s = setup();
    const query = await s.start(s.df);
    s.stream.addData([malformed, notObjectArray]);
    await query.processAllAvailable();
    expect(query.lastProgress?.batchId).toBe(0);
    expect(query.lastProgress?.numInputRows).toBe(0);
    expect(query.lastProgress?.numDeadLetteredRows).toBe(2);
    expect(query.lastProgress?.sources[0]).toMatchObject({ startOffset: null, endOffset: 1 });
    expect(s.sink.allRows()).toEqual([]);
    // The offset was consumed: the next batch starts after it.
    s.stream.addData([good1]);
    await query.processAllAvailable();
    expect(query.lastProgress?.sources[0]).toMatchObject({ startOffset: 1, endOffset: 2, numInputRows: 1 });
    expect(query.lastProgress?.numDeadLetteredRows).toBe(0);
    expect(s.sink.allRows()).toEqual([['a', 1, 10]]);
    await query.stop();
  });

  it('in a stateful query, invalid records change no group', async () => {
    const s = setup();
    const totals = s.df.groupBy('k').agg(sum('v').as('total'));
    const query = await s.start(totals, 'update');
    s.stream.addData([good1, wrongType, rec({ k: 'a', v: 5 }), rec({ k: 'b', v: 2 })]);
    await query.processAllAvailable();
    expect(sorted(s.sink.allRows())).toEqual([['a', 6], ['b', 2]]);
    expect(query.lastProgress?.numDeadLetteredRows).toBe(1);
    await query.stop();
  });
});

describe('JsonMemoryStream: restart from a checkpoint', () => {
  it('a stopped and restarted query resumes after the committed offset: no duplicates, none lost', async () => {
    const s = setup();
    const totals = s.df.groupBy('k').agg(sum('v').as('total'));
    let query = await s.start(totals, 'update');
    s.stream.addData([rec({ k: 'a', v: 1 }), 'not json', rec({ k: 'b', v: 10 })]);
    await query.processAllAvailable();
    await query.stop();
    s.stream.addData([rec({ k: 'a', v: 2 }), rec({ k: 'a', v: 'x' })]);
    s.stream.addData([rec({ k: 'b', v: 5 })]);

    query = await s.start(totals, 'update');
    await query.processAllAvailable();
    // One batch for the two offsets added while stopped.
    expect(query.lastProgress?.batchId).toBe(1);
    expect(query.lastProgress?.sources[0]).toMatchObject({ startOffset: 1, endOffset: 3, numInputRows: 2 });
    expect(query.lastProgress?.numDeadLetteredRows).toBe(1);
    expect(sorted(s.sink.lastBatch()!.rows)).toEqual([['a', 3], ['b', 15]]);
    expect(s.stream.invalidRecords.map((r) => [r.offset, r.record])).toEqual([[1, 'not json'], [2, rec({ k: 'a', v: 'x' })]]);
    await query.stop();
  });

  it('a batch that failed after it was planned is replayed from the stream exactly once', async () => {
    const s = setup();
    const totals = s.df.failOnce(col('v').eq(99), 'injected').groupBy('k').agg(sum('v').as('total'));
    let query = await s.start(totals, 'update');
    s.stream.addData([rec({ k: 'a', v: 1 }), rec({ k: 'b', v: 10 }), '{broken']);
    await query.processAllAvailable();
    expect(sorted(s.sink.allRows())).toEqual([['a', 1], ['b', 10]]);

    s.stream.addData([rec({ k: 'a', v: 99 }), rec({ k: 'b', v: 'bad' }), rec({ k: 'c', v: 7 })]);
    await expect(query.processAllAvailable()).rejects.toThrow(/injected/);
    expect(query.isActive).toBe(false);
    expect(s.sink.latestBatchId).toBe(0);

    query = await s.start(totals, 'update');
    await query.processAllAvailable();
    // The re-run is batch 1 with the planned offsets (1, 2].
    expect(query.lastProgress?.batchId).toBe(1);
    expect(query.lastProgress?.sources[0]).toMatchObject({ startOffset: 1, endOffset: 2, numInputRows: 2 });
    expect(query.lastProgress?.numDeadLetteredRows).toBe(1);
    expect(sorted(s.sink.lastBatch()!.rows)).toEqual([['a', 100], ['c', 7]]);
    expect(sorted(s.sink.allRows())).toEqual([['a', 1], ['a', 100], ['b', 10], ['c', 7]]);
    // Re-decoding offset 2 does not list its invalid record twice.
    expect(s.stream.invalidRecords.map((r) => [r.offset, r.record])).toEqual([[1, '{broken'], [2, rec({ k: 'b', v: 'bad' })]]);

    s.stream.addData([rec({ k: 'b', v: 1 })]);
    await query.processAllAvailable();
    expect(s.sink.lastBatch()!.rows.map((r) => [...r])).toEqual([['b', 11]]);
    await query.stop();
  });

  it('append of a stateless query over a restart writes each valid record once', async () => {
    const s = setup();
    let query = await s.start(s.df.select('k', 'v'));
    s.stream.addData([rec({ k: 'a', v: 1 }), rec({ k: 'b', v: 2 })]);
    await query.processAllAvailable();
    await query.stop();
    query = await s.start(s.df.select('k', 'v'));
    await query.processAllAvailable();
    expect(s.sink.latestBatchId).toBe(0);
    s.stream.addData([rec({ k: 'c', v: 3 }), '[]']);
    await query.processAllAvailable();
    expect(sorted(s.sink.allRows())).toEqual([['a', 1], ['b', 2], ['c', 3]]);
    expect(s.stream.invalidRecords).toHaveLength(1);
    await query.stop();
  });
});

describe('JsonMemoryStream: column pruning', () => {
  it('the engine names the columns the query reads before the first batch', async () => {
    const s = setup('k string, v long, extra long, note string');
    const prune = vi.spyOn(s.stream, 'pruneColumns');
    const query = await s.start(s.df.groupBy('k').agg(sum('v').as('total')), 'update');
    expect(prune).toHaveBeenCalled();
    expect([...prune.mock.calls.at(-1)![0]].sort()).toEqual(['k', 'v']);
    await query.stop();
  });

  it('two queries on one stream, reading different columns, each get theirs', async () => {
    const { stream, df } = new SluiceSession().jsonMemoryStream('k string, v long, w long');
    const sums = new MemorySink();
    const keys = new MemorySink();
    const bySum = await df.groupBy('k').agg(sum('v').as('total')).writeStream.outputMode('update').sink(sums).checkpoint(new MemoryCheckpoint()).start();
    const byW = await df.select('k', 'w').writeStream.outputMode('append').sink(keys).checkpoint(new MemoryCheckpoint()).start();
    stream.addData([rec({ k: 'a', v: 1, w: 10 }), rec({ k: 'b', v: 2, w: 20 })]);
    await bySum.processAllAvailable();
    await byW.processAllAvailable();
    expect(sorted(sums.allRows())).toEqual([['a', 1], ['b', 2]]);
    expect(sorted(keys.allRows())).toEqual([['a', 10], ['b', 20]]);
    await bySum.stop();
    await byW.stop();
  });

  it('a wrong-typed value in an unused column does not make the record invalid; in a used column it does', async () => {
    const s = setup('k string, v long, extra long, flag boolean');
    const query = await s.start(s.df.groupBy('k').agg(sum('v').as('total')), 'update');
    const unusedWrong = rec({ k: 'a', v: 1, extra: 'not a long', flag: 'not a boolean' });
    const usedWrong = rec({ k: 'a', v: 'not a long', extra: 1 });
    s.stream.addData([unusedWrong, usedWrong, rec({ k: 'a', v: 2, extra: [1, 2], flag: { nested: true } })]);
    await query.processAllAvailable();
    expect(sorted(s.sink.allRows())).toEqual([['a', 3]]);
    expect(query.lastProgress?.numDeadLetteredRows).toBe(1);
    expect(s.stream.invalidRecords.map((r) => r.record)).toEqual([usedWrong]);
    expect(s.stream.invalidRecords[0]!.reason).toMatch(/field 'v'/);
    // A malformed record is invalid whatever the query reads.
    s.stream.addData(['{"k": "a", "v": 1', rec({ k: 'a', v: 4 })]);
    await query.processAllAvailable();
    expect(s.sink.lastBatch()!.rows.map((r) => [...r])).toEqual([['a', 7]]);
    expect(query.lastProgress?.numDeadLetteredRows).toBe(1);
    await query.stop();
  });

  it('through a rename: a wrong-typed value in an unused column still does not make the record invalid', async () => {
    const s = setup('k string, v long, extra long');
    const prune = vi.spyOn(s.stream, 'pruneColumns');
    const renamed = s.df.withColumnRenamed('k', 'key').groupBy('key').agg(sum('v').as('total'));
    const query = await s.start(renamed, 'update');
    expect([...prune.mock.calls.at(-1)![0]].sort()).toEqual(['k', 'v']);
    s.stream.addData([rec({ k: 'a', v: 1, extra: 'not a long' }), rec({ k: 'a', v: 2 })]);
    await query.processAllAvailable();
    expect(s.sink.allRows()).toEqual([['a', 3]]);
    expect(query.lastProgress?.numDeadLetteredRows).toBe(0);
    expect(s.stream.invalidRecords).toEqual([]);
    await query.stop();
  });

  it('pruning does not change the result: a window() in a projection still filters NULL times and expands sliding windows', async () => {
    // Spark: a window() in select is TimeWindowing's Filter(isnotnull(time)) (tumbling) or Expand
    // (sliding); the time column is read even when the window column is dropped later.
    const records = [rec({ k: 'a', ts: 1 }), rec({ k: 'b' }), rec({ k: 'c', ts: 7 })];
    for (const [slide, expected] of [
      [undefined, [['a'], ['c']]],
      // ts 1 is in [-5, 5) and [0, 10); ts 7 in [0, 10) and [5, 15); the NULL time is in none.
      ['5 seconds', [['a'], ['a'], ['c'], ['c']]],
    ] as const) {
      const s = setup('k string, ts timestamp, junk string');
      const q = s.df.select(col('k'), window(col('ts'), '10 seconds', slide).as('w')).select('k');
      const query = await s.start(q);
      s.stream.addData(records);
      await query.processAllAvailable();
      expect(sorted(s.sink.allRows()), `slide ${slide ?? 'none'}`).toEqual(expected);
      await query.stop();
    }
  });

  it('a projection or filter reading a column makes that column checked', async () => {
    const s = setup('k string, v long, extra long, flag boolean');
    const query = await s.start(s.df.filter(col('extra').gt(0)).select('k', 'v'));
    s.stream.addData([
      rec({ k: 'a', v: 1, extra: 5, flag: 'nope' }),
      rec({ k: 'b', v: 2, extra: 'bad' }),
      rec({ k: 'c', v: 3, extra: -1 }),
    ]);
    await query.processAllAvailable();
    expect(s.sink.allRows()).toEqual([['a', 1]]);
    expect(query.lastProgress?.numDeadLetteredRows).toBe(1);
    expect(s.stream.invalidRecords.map((r) => r.record)).toEqual([rec({ k: 'b', v: 2, extra: 'bad' })]);
    expect(s.stream.invalidRecords[0]!.reason).toMatch(/field 'extra'/);
    await query.stop();
  });

  it('a query passing every column to the sink checks every column', async () => {
    const s = setup('k string, v long, extra long');
    const prune = vi.spyOn(s.stream, 'pruneColumns');
    const query = await s.start(s.df.filter(col('v').gt(0)));
    expect([...prune.mock.calls.at(-1)![0]].sort()).toEqual(['extra', 'k', 'v']);
    const bad = rec({ k: 'a', v: 1, extra: 'not a long' });
    s.stream.addData([bad, rec({ k: 'b', v: 2, extra: 3 })]);
    await query.processAllAvailable();
    expect(s.sink.allRows()).toEqual([['b', 2, 3]]);
    expect(query.lastProgress?.numDeadLetteredRows).toBe(1);
    expect(s.stream.invalidRecords[0]).toMatchObject({ offset: 1, record: bad });
    expect(s.stream.invalidRecords[0]!.reason).toMatch(/field 'extra'/);
    await query.stop();
  });

  it('a windowed aggregation with a watermark checks the event time, key and value, not the rest', async () => {
    const s = setup('k string, v long, ts timestamp, note long');
    const q = s.df.withWatermark('ts', '10 seconds').groupBy(window(col('ts'), '10 seconds'), col('k')).agg(sum('v').as('total'));
    const query = await s.start(q, 'update');
    s.stream.addData([
      rec({ k: 'a', v: 1, ts: 1, note: 'free text where a long should be' }),
      rec({ k: 'a', v: 2, ts: 'yesterday-ish' }),
      rec({ k: 'a', v: 3, ts: 4 }),
    ]);
    await query.processAllAvailable();
    expect(s.sink.allRows()).toEqual([[{ start: 0, end: 10_000_000 }, 'a', 4]]);
    expect(s.stream.invalidRecords.map((r) => r.reason)).toEqual([expect.stringMatching(/field 'ts'/)]);
    expect(query.recentProgress.find((p) => p.batchId === 0)?.numDeadLetteredRows).toBe(1);
    await query.stop();
  });
});
