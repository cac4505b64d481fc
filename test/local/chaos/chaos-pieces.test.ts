/**
 * The chaos harness's judges without emulators: the comparison of final contents (multisets per
 * key), the history of sink writes against the commit log, the fault plan and the fault
 * controller's account of faults that never happened. Each planted bug must be reported.
 */
import { describe, expect, it } from 'vitest';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { compareRows } from '../../../lib/local/chaos/compare.js';
import { FAULT_KINDS, FAULT_POINT, FaultController, planFaults } from '../../../lib/local/chaos/faults.js';
import { SinkHistory } from '../../../lib/local/chaos/history.js';
import { createPrng } from '../../../lib/local/sample-events.js';
import type { SinkBatch } from '../../../lib/sinks/sink.js';

const w = (h: number) => ({ start: `2024-05-01T${h}:00:00Z`, end: `2024-05-01T${h + 1}:00:00Z` });

describe('compareRows: multisets per key', () => {
  it('lost, duplicated, mismatched, unexpected', () => {
    const want = [{ window: w(12), store_id: 'a', sales: 1 }, { window: w(12), store_id: 'b', sales: 2 }, { window: w(13), store_id: 'a', sales: 3 }];
    expect(compareRows(want, [...want].reverse(), ['window', 'store_id'])).toMatchObject({ lost: 0, duplicated: 0, mismatched: 0 });
    // Attribute order does not matter (DynamoDB returns its own).
    expect(compareRows(want, want.map((r) => ({ sales: r.sales, store_id: r.store_id, window: { end: r.window.end, start: r.window.start } })), ['window', 'store_id']))
      .toMatchObject({ lost: 0, duplicated: 0, mismatched: 0 });
    const got = [want[0]!, want[0]!, { ...want[1]!, sales: 5 }, { window: w(14), store_id: 'z', sales: 9 }];
    expect(compareRows(want, got, ['window', 'store_id'])).toMatchObject({ lost: 1, duplicated: 1, mismatched: 2 });
  });

  it('an expected [A, B] does not pass as [A, A], nor [A] as [A, A]', () => {
    // Append mode: two rows of one key (an update of a window emitted twice, say).
    const a = { window: w(12), store_id: 'a', sales: 1 };
    const b = { window: w(12), store_id: 'a', sales: 2 };
    expect(compareRows([a, b], [a, a], ['window', 'store_id'])).toMatchObject({ lost: 0, duplicated: 0, mismatched: 1 });
    expect(compareRows([a, b], [b, a], ['window', 'store_id'])).toMatchObject({ lost: 0, duplicated: 0, mismatched: 0 });
    expect(compareRows([a], [a, a], ['window', 'store_id'])).toMatchObject({ lost: 0, duplicated: 1, mismatched: 0 });
    expect(compareRows([a, b], [b], ['window', 'store_id'])).toMatchObject({ lost: 1, duplicated: 0, mismatched: 0 });
  });
});

describe('SinkHistory: every write a reader could see, against the committed batches', () => {
  const schema = [
    { name: 'store_id', dataType: 'string', nullable: true },
    { name: 'sales', dataType: 'double', nullable: true },
  ] as unknown as SinkBatch['schema'];
  const batch = (batchId: number, rows: [string, number][]): SinkBatch => ({
    batchId, partitionId: 'shard-0', columns: ['store_id', 'sales'], outputMode: 'update', schema, rows,
  });
  const item = (batchId: number, store: string, sales: number): Record<string, AttributeValue> =>
    marshall({ pk: store, _partition: 'shard-0', _batchId: batchId, store_id: store, sales });
  const committed = new Set(['shard-0#0', 'shard-0#1']);

  it('passes a history where every value is its committed batch\'s and no key goes back', () => {
    const h = new SinkHistory(['store_id'], '');
    h.attempt(batch(0, [['a', 1]]));
    h.dynamoDbWrite(item(0, 'a', 1));
    h.attempt(batch(0, [['a', 1]])); // a re-run: the same rows
    h.dynamoDbWrite(item(0, 'a', 1));
    h.attempt(batch(1, [['a', 3], ['b', 2]]));
    h.dynamoDbWrite(item(1, 'a', 3));
    h.dynamoDbWrite(item(1, 'b', 2));
    expect(h.check(committed)).toMatchObject({ lost: 0, duplicated: 0, mismatched: 0 });
  });

  it('reports a zombie\'s older value written over a newer one (the final contents may still be right)', () => {
    const h = new SinkHistory(['store_id'], '');
    h.attempt(batch(0, [['a', 1]]));
    h.attempt(batch(1, [['a', 3]]));
    h.dynamoDbWrite(item(0, 'a', 1));
    h.dynamoDbWrite(item(1, 'a', 3));
    h.dynamoDbWrite(item(0, 'a', 1)); // the zombie
    h.dynamoDbWrite(item(1, 'a', 3));
    const d = h.check(committed);
    expect(d.mismatched).toBe(1);
    expect(d.examples.join('\n')).toMatch(/went back from batch 1 to 0/);
  });

  it('reports a re-run that wrote other rows, and a value no committed batch holds', () => {
    const h = new SinkHistory(['store_id'], '');
    h.attempt(batch(0, [['a', 1]]));
    h.attempt(batch(0, [['a', 2]]));
    h.dynamoDbWrite(item(0, 'a', 2));
    const d = h.check(committed);
    expect(d.mismatched).toBe(2);
    expect(d.examples.join('\n')).toMatch(/re-ran with 1 different rows/);
    expect(d.examples.join('\n')).toMatch(/its committed answer for \["a"\] is/);
  });

  it('reports writes of a batch that never committed', () => {
    const h = new SinkHistory(['store_id'], '');
    h.attempt(batch(2, [['a', 9]]));
    h.dynamoDbWrite(item(2, 'a', 9));
    expect(h.check(committed)).toMatchObject({ mismatched: 1 });
  });

  it('S3: a data object must hold its batch\'s rows (orphans too); a manifest names committed batches only', () => {
    const h = new SinkHistory(['store_id'], 'run/q/');
    h.attempt(batch(0, [['a', 1], ['a', 2]]));
    h.s3Put('run/q/data/partition=shard-0/batch=000000000000.jsonl', '{"store_id":"a","sales":1}\n{"store_id":"a","sales":2}\n');
    h.s3Put('run/q/_sluice_metadata/partition=shard-0/000000000000.json', '{}');
    expect(h.check(committed)).toMatchObject({ mismatched: 0 });
    expect(h.figures()).toEqual({ writes: 2, attempts: 1, orphans: 0 });
    // A sink bug: the rows written twice into the object ([A, B] became [A, B, A, B]).
    h.s3Put('run/q/data/partition=shard-0/batch=000000000000.jsonl', '{"store_id":"a","sales":1}\n{"store_id":"a","sales":2}\n'.repeat(2));
    // An orphan (no manifest) of an uncommitted batch, and a manifest of another.
    h.attempt(batch(5, [['b', 1]]));
    h.s3Put('run/q/data/partition=shard-0/batch=000000000005.jsonl', '{"store_id":"b","sales":1}\n');
    h.s3Put('run/q/_sluice_metadata/partition=shard-0/000000000007.json', '{}');
    const d = h.check(committed);
    expect(d.mismatched).toBe(2 + 1);
    expect(h.figures().orphans).toBe(1);
    // Objects outside the sink's prefix (dead letters) are not the sink's.
    h.s3Put('run/dead-letter/x.json', '{}');
    expect(h.figures().writes).toBe(5);
  });
});

describe('fault plans', () => {
  it('the same faults for the same seed: each kind whose point occurs, once, plus extras, in the first 70% of occurrences', () => {
    const counts = { 'get-records': 2, 'sink-write': 9, 'state-version-write': 12, 'offset-write': 10, invocation: 8, response: 8, 'dynamodb-request': 200, 'conditional-write': 40 };
    const a = planFaults(createPrng(5), counts, 2);
    expect(planFaults(createPrng(5), counts, 2)).toEqual(a);
    expect(planFaults(createPrng(6), counts, 2)).not.toEqual(a);
    const usable = FAULT_KINDS.filter((k) => ((counts as Record<string, number>)[FAULT_POINT[k]] ?? 0) >= 3);
    for (const kind of usable) expect(a.some((f) => f.kind === kind), kind).toBe(true);
    expect(a.length).toBeGreaterThanOrEqual(usable.length);
    // A point met twice only is left alone: its occurrence may not come in a run with faults.
    expect(a.some((f) => f.kind === 'short-get-records')).toBe(false);
    for (const f of a) expect(f.at).toBeLessThanOrEqual(Math.floor(((counts as Record<string, number>)[FAULT_POINT[f.kind]]! - 1) * 0.7));
    expect(new Set(a.map((f) => `${FAULT_POINT[f.kind]}#${f.at}`)).size).toBe(a.length);
  });

  it('a planned fault whose occurrence never comes is reported missed', () => {
    const controller = new FaultController([{ kind: 'crash-before-run', at: 1 }, { kind: 'duplicate-delivery', at: 5 }]);
    for (let i = 0; i < 3; i++) controller.hit('invocation', () => `invocation ${i}`);
    expect(controller.injected.map((f) => f.kind)).toEqual(['crash-before-run']);
    expect(controller.missed).toEqual([{ kind: 'duplicate-delivery', at: 5 }]);
  });
});
