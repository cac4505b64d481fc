/** `sluice dev`'s summary: every count says what it is made of, and the parts add up. */
import { describe, expect, it } from 'vitest';
import { inputFilesOf, summaryLines } from '../../../lib/local/dev/run-dev.js';
import { joinThenJoinOnOtherKey } from '../../support/chain-queries.js';
import { hourlySalesQuery } from '../../../lib/local/dev/default-query.js';
import { formatProgressLine } from '../../../lib/local/dev/report.js';
import { sampleProgress } from '../../support/emitted-metrics.js';

const totals = {
  batches: 20, noData: 7, deadLetterOnly: 1, byTick: 4, stage1: 0, inputRows: 130, routed: 0, outputRows: 32, late: 3, deadLettered: 2,
};

describe('summaryLines', () => {
  it('splits records into input rows and dead letters, and batches into the mapping\'s and the tick\'s', () => {
    const lines = summaryLines({ totals, records: 132, waves: 2, invocations: 18, retries: 1, bisects: 0, givenUp: 0, needsRepartition: false, outputMode: 'update' });
    expect(lines).toEqual([
      'records put: 132 in 2 waves = 130 read as input rows + 2 dead-lettered',
      'batches: 20 committed = 12 with input rows + 1 whose records were all dead-lettered + 7 no-data batches (run because the watermark moved: they close windows and drop expired state)',
      '  run by: 16 in 18 Lambda invocations of the event source mapping (an invocation runs its records\' batch, then a no-data batch if the watermark moved; '
        + '1 retry, 0 bisects; 2 invocations committed no batch: a failed attempt or records already committed) + 4 by the scheduled tick',
      'rows: 130 in, 32 out, 3 late rows dropped by the watermark (out: rows the batches wrote to the sink, a key again in every batch that changed it)',
    ]);
  });

  it('counts the rows dropped for a NULL event time, so that rows in add up to what the windows hold', () => {
    const lines = summaryLines({
      totals: { ...totals, nullEventTime: 2 }, records: 132, waves: 1, invocations: 18, retries: 0, bisects: 0, givenUp: 0, needsRepartition: false, outputMode: 'update',
    });
    expect(lines[3]).toBe('rows: 130 in, 32 out, 3 late rows dropped by the watermark, 2 rows with a NULL event time (dropped by window(), numRowsNullEventTime in progress)'
      + ' (out: rows the batches wrote to the sink, a key again in every batch that changed it)');
  });

  it('each batch\'s line names its rows with a NULL event time, only when there are some', () => {
    expect(formatProgressLine('s', sampleProgress({ numRowsNullEventTime: 2 }))).toMatch(/, 2 late rows dropped, 2 with a NULL event time, 1 dead-lettered,/);
    expect(formatProgressLine('s', sampleProgress())).not.toMatch(/NULL event time/);
  });

  it('says what is missing when records were not read, and shows the two stages of a repartitioned query', () => {
    const lines = summaryLines({
      totals: { ...totals, stage1: 9, routed: 120, inputRows: 120 }, records: 132, waves: 1, invocations: 16, retries: 0, bisects: 0, givenUp: 2,
      needsRepartition: true, outputMode: 'append',
    });
    expect(lines[0]).toBe('records put: 132 = 120 read as input rows + 2 dead-lettered (10 not read: in 2 batches given up after retries)');
    expect(lines[3]).toBe('  stages: 9 batches of stage 1 (decode, route rows by state key: 120 rows routed) + 11 of stage 2 (state and sink)');
    expect(lines[4]).toMatch(/out: rows the batches wrote to the sink, each row once, when final\)$/);
  });

  it('counts the batches of every stage of a longer chain, the last one writing the sink', () => {
    const lines = summaryLines({
      totals: { ...totals, stage1: 9, routed: 120, inputRows: 120 }, records: 132, waves: 1, invocations: 16, retries: 0, bisects: 0, givenUp: 0,
      needsRepartition: true, outputMode: 'append', byStage: new Map([[1, 9], [2, 6], [3, 5]]),
    });
    expect(lines[3]).toBe('  stages: 9 batches of stage 1 (decode, route rows by state key: 120 rows routed) + 6 of stage 2 (state, rows routed on) + 5 of stage 3 (state and sink)');
  });
});

describe('inputFilesOf (--input)', () => {
  const three = joinThenJoinOnOtherKey('dev-inputs');

  it('takes one plain file for a one-stream query, and <source>=<file> per source for several streams', () => {
    expect(inputFilesOf(hourlySalesQuery('update'), 'sales.jsonl')).toEqual(new Map([['kinesis', 'sales.jsonl']]));
    expect(inputFilesOf(hourlySalesQuery('update'), undefined)).toBeNull();
    expect(inputFilesOf(three, ['orders=o.jsonl', 'payments=p=1.jsonl', 'shipments=s.jsonl']))
      .toEqual(new Map([['orders', 'o.jsonl'], ['payments', 'p=1.jsonl'], ['shipments', 's.jsonl']]));
  });

  it('refuses what it cannot map to the sources, saying how to give them', () => {
    expect(() => inputFilesOf(three, undefined)).toThrow(/reads several streams \(orders, payments, shipments\).*--input orders=<file> --input payments=<file> --input shipments=<file>/);
    expect(() => inputFilesOf(three, ['orders=o.jsonl', 'payments=p.jsonl'])).toThrow(/no --input for source shipments/);
    expect(() => inputFilesOf(three, ['orders=o.jsonl', 'refunds=r.jsonl', 'x'])).toThrow(/--input refunds=r.jsonl names no source/);
    expect(() => inputFilesOf(three, ['orders=a', 'orders=b'])).toThrow(/names source 'orders' twice/);
    expect(() => inputFilesOf(hourlySalesQuery('update'), ['a.jsonl', 'b.jsonl'])).toThrow(/reads one stream: give one --input file, not 2/);
  });
});
