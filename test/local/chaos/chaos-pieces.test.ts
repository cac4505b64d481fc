/**
 * The chaos harness's judges without emulators: the comparison of final contents (multisets per
 * key), the history of sink writes against the commit log, the fault plan and the fault
 * controller's account of faults that never happened. Each planted bug must be reported.
 */
import { describe, expect, it } from 'vitest';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { compareRows } from '../../../lib/local/chaos/compare.js';
import { FAULT_KINDS, FAULT_POINT, FaultController, OPT_IN_KINDS, planFaults, SOURCE_ONLY_KINDS } from '../../../lib/local/chaos/faults.js';
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

  it('passes a history where every value is its committed batch\'s and no key goes back', async () => {
    const h = new SinkHistory(['store_id'], '');
    h.attempt(batch(0, [['a', 1]]));
    h.dynamoDbWrite(item(0, 'a', 1));
    h.attempt(batch(0, [['a', 1]])); // a re-run: the same rows
    h.dynamoDbWrite(item(0, 'a', 1));
    h.attempt(batch(1, [['a', 3], ['b', 2]]));
    h.dynamoDbWrite(item(1, 'a', 3));
    h.dynamoDbWrite(item(1, 'b', 2));
    expect((await h.check(committed))).toMatchObject({ lost: 0, duplicated: 0, mismatched: 0 });
  });

  it('reports a zombie\'s older value written over a newer one (the final contents may still be right)', async () => {
    const h = new SinkHistory(['store_id'], '');
    h.attempt(batch(0, [['a', 1]]));
    h.attempt(batch(1, [['a', 3]]));
    h.dynamoDbWrite(item(0, 'a', 1));
    h.dynamoDbWrite(item(1, 'a', 3));
    h.dynamoDbWrite(item(0, 'a', 1)); // the zombie
    h.dynamoDbWrite(item(1, 'a', 3));
    const d = await h.check(committed);
    expect(d.mismatched).toBe(1);
    expect(d.examples.join('\n')).toMatch(/went back from batch 1 to 0/);
  });

  it('knows when a zombie of an upsert sink can show a missing fence: a newer batch of its partition wrote one of its keys', () => {
    const h = new SinkHistory(['store_id'], '');
    const zombie = batch(0, [['a', 1], ['c', 5]]);
    h.dynamoDbWrite(item(0, 'a', 1));
    expect(h.newerWriteOfKeys(zombie)).toBe(false); // only its own batch wrote 'a'
    h.dynamoDbWrite(item(1, 'b', 2));
    expect(h.newerWriteOfKeys(zombie)).toBe(false); // a newer batch, another key
    h.dynamoDbWrite(marshall({ pk: 'c', _partition: 'shard-1', _batchId: 4, store_id: 'c', sales: 7 }));
    expect(h.newerWriteOfKeys(zombie)).toBe(false); // its key, another partition
    h.dynamoDbWrite(item(1, 'c', 6));
    expect(h.newerWriteOfKeys(zombie)).toBe(true);
    expect(new SinkHistory(['store_id'], 's3://bucket/prefix/').newerWriteOfKeys(zombie)).toBeUndefined();
  });

  it('reports a re-run that wrote other rows, and a value no committed batch holds', async () => {
    const h = new SinkHistory(['store_id'], '');
    h.attempt(batch(0, [['a', 1]]));
    h.attempt(batch(0, [['a', 2]]));
    h.dynamoDbWrite(item(0, 'a', 2));
    const d = await h.check(committed);
    expect(d.mismatched).toBe(2);
    expect(d.examples.join('\n')).toMatch(/re-ran with 1 different rows/);
    expect(d.examples.join('\n')).toMatch(/its committed answer for \["a"\] is/);
  });

  it('reports writes of a batch that never committed', async () => {
    const h = new SinkHistory(['store_id'], '');
    h.attempt(batch(2, [['a', 9]]));
    h.dynamoDbWrite(item(2, 'a', 9));
    expect((await h.check(committed))).toMatchObject({ mismatched: 1 });
  });

  // The files sink's layout (format version 2): staged, manifest, revealed by a copy.
  const prefix = 'run/q/';
  const staged = (b: number, i = 0): string => `${prefix}_sluice_staging/partition=shard-0/${String(b).padStart(12, '0')}/${i}.jsonl.staged`;
  const visible = (b: number, folder = ''): string => `${prefix}${folder}part-shard-0-${String(b).padStart(12, '0')}.jsonl`;
  const manifest = (b: number, files: { key: string; stagedKey: string; rows: number; partition?: Record<string, unknown> }[]): [string, string] => [
    `${prefix}_sluice_metadata/partition=shard-0/${String(b).padStart(12, '0')}.json`,
    JSON.stringify({ formatVersion: 2, partitionId: 'shard-0', batchId: b, format: 'jsonl', files }),
  ];
  const lines = (rows: [string, number][]): string => rows.map(([store, sales]) => `{"store_id":"${store}","sales":${sales}}\n`).join('');

  it('S3 files: a committed batch staged, then revealed whole, passes; staged files of an uncommitted batch stay hidden', async () => {
    const h = new SinkHistory(['store_id'], prefix);
    h.attempt(batch(0, [['a', 1], ['a', 2]]));
    h.s3Put(staged(0), lines([['a', 1], ['a', 2]]));
    h.s3Put(...manifest(0, [{ key: visible(0), stagedKey: staged(0), rows: 2 }]));
    h.s3Copy(staged(0), visible(0));
    // Batch 5 never commits: staged only (and no manifest entry: its attempt died before it).
    h.attempt(batch(5, [['b', 1]]));
    h.s3Put(staged(5), lines([['b', 1]]));
    expect(await h.check(committed)).toMatchObject({ lost: 0, mismatched: 0 });
    expect(h.figures(committed)).toEqual({ writes: 4, attempts: 2, orphans: 1 });
    // Objects outside the sink's prefix (dead letters) are not the sink's.
    h.s3Put('run/dead-letter/x.json', '{}');
    expect(h.figures(committed).writes).toBe(4);
  });

  it('S3 files: an object in the sink that no recorded write put there (an orphan the history never saw) is a mismatch', () => {
    const h = new SinkHistory(['store_id'], prefix);
    h.s3Put(staged(0), lines([['a', 1]]));
    h.s3Put(...manifest(0, [{ key: visible(0), stagedKey: staged(0), rows: 1 }]));
    h.s3Copy(staged(0), visible(0));
    const seen = [staged(0), manifest(0, [])[0], visible(0)];
    expect(h.unrecorded(seen)).toMatchObject({ mismatched: 0 });
    // Keys outside the prefix are not the sink's.
    expect(h.unrecorded([...seen, 'run/dead-letter/x.json'])).toMatchObject({ mismatched: 0 });
    const orphan = `${prefix}store_id=a/part-shard-0-000000000007.jsonl`;
    const d = h.unrecorded([...seen, orphan]);
    expect(d.mismatched).toBe(1);
    expect(d.examples[0]).toContain(orphan);
  });

  it('S3 files: a visible file of an uncommitted batch, one with other rows, a committed batch never revealed, a manifest of an uncommitted batch', async () => {
    const h = new SinkHistory(['store_id'], prefix);
    h.attempt(batch(0, [['a', 1], ['a', 2]]));
    // A sink bug: the rows twice in the staged file ([A, B] became [A, B, A, B]), revealed.
    h.s3Put(staged(0), lines([['a', 1], ['a', 2]]).repeat(2));
    h.s3Put(...manifest(0, [{ key: visible(0), stagedKey: staged(0), rows: 4 }]));
    h.s3Copy(staged(0), visible(0));
    // Revealed before its commit (which never came).
    h.attempt(batch(5, [['b', 1]]));
    h.s3Put(staged(5), lines([['b', 1]]));
    h.s3Copy(staged(5), visible(5));
    // Committed, its manifest entry written, its file never copied to the visible key.
    h.attempt(batch(1, [['c', 1]]));
    h.s3Put(staged(1), lines([['c', 1]]));
    h.s3Put(...manifest(1, [{ key: visible(1), stagedKey: staged(1), rows: 1 }]));
    // A manifest entry of a batch the commit log lacks.
    h.s3Put(...manifest(7, []));
    const d = await h.check(committed);
    expect(d).toMatchObject({ lost: 1, mismatched: 2 + 1 + 1 });
    const text = d.examples.join('\n');
    expect(text).toMatch(/visible file .*part-shard-0-000000000000.jsonl differs from batch shard-0\/0 in 2 rows/);
    expect(text).toMatch(/visible file .* of uncommitted batch shard-0\/5/);
    expect(text).toMatch(/part-shard-0-000000000001.jsonl never became visible/);
    expect(text).toMatch(/manifest entry of uncommitted batch shard-0\/7/);
  });

  it('S3 files: Hive folders hold their rows (partition values from the manifest), rejected rows are no loss', async () => {
    const h = new SinkHistory(['store_id'], prefix);
    h.attempt(batch(0, [['a', 1], ['b', 2], ['b', 3]]));
    const only = (sales: number): string => `{"sales":${sales}}\n`;
    h.s3Put(staged(0, 0), only(1));
    h.s3Put(staged(0, 1), only(2));
    h.s3Put(`${prefix}_sluice_rejected/partition=shard-0/000000000000.jsonl`, '{"reason":"too long","row":{"store_id":"b","sales":3}}\n');
    h.s3Put(...manifest(0, [
      { key: visible(0, 'store_id=a/'), stagedKey: staged(0, 0), rows: 1, partition: { store_id: 'a' } },
      { key: visible(0, 'store_id=b/'), stagedKey: staged(0, 1), rows: 1, partition: { store_id: 'b' } },
    ]));
    h.s3Copy(staged(0, 0), visible(0, 'store_id=a/'));
    h.s3Copy(staged(0, 1), visible(0, 'store_id=b/'));
    expect(await h.check(committed)).toMatchObject({ lost: 0, mismatched: 0 });
    // A file revealed in the wrong folder.
    h.s3Copy(staged(0, 0), visible(0, 'store_id=b/'));
    expect((await h.check(committed)).mismatched).toBe(1);
  });

  it('longs beyond 2^53 compare exactly (JSON Lines digits, DynamoDB numbers, engine bigints)', async () => {
    const longSchema = [{ name: 'store_id', type: 'string' }, { name: 'orders', type: 'long' }] as unknown as SinkBatch['schema'];
    const big = (batchId: number, orders: bigint): SinkBatch => ({
      batchId, partitionId: 'shard-0', columns: ['store_id', 'orders'], outputMode: 'append', schema: longSchema, rows: [['a', orders]],
    });
    const h = new SinkHistory(['store_id'], prefix);
    h.attempt(big(0, 9007199254740993n));
    h.s3Put(staged(0), '{"store_id":"a","orders":9007199254740993}\n');
    h.s3Put(...manifest(0, [{ key: visible(0), stagedKey: staged(0), rows: 1 }]));
    h.s3Copy(staged(0), visible(0));
    expect(await h.check(committed)).toMatchObject({ mismatched: 0 });
    // One unit off, which JSON.parse (rounding both to 2^53) could not tell apart.
    h.attempt(big(1, 9007199254740992n));
    h.s3Put(staged(1), '{"store_id":"a","orders":9007199254740993}\n');
    h.s3Put(...manifest(1, [{ key: visible(1), stagedKey: staged(1), rows: 1 }]));
    h.s3Copy(staged(1), visible(1));
    expect((await h.check(committed)).mismatched).toBe(1);

    const d = new SinkHistory(['store_id'], '');
    d.attempt(big(0, 12345678901234567n));
    d.dynamoDbWrite(marshall({ pk: 'a', _partition: 'shard-0', _batchId: 0, store_id: 'a', orders: 12345678901234567n }));
    expect(await d.check(committed)).toMatchObject({ mismatched: 0 });
  });
});

describe('fault plans', () => {
  it('the same faults for the same seed: each kind whose point occurs, once, plus extras, in the first 70% of occurrences', () => {
    const counts = { 'get-records': 2, 'sink-write': 9, 'state-version-write': 12, 'offset-write': 10, invocation: 8, response: 8, 'dynamodb-request': 200, 'conditional-write': 40 };
    const a = planFaults(createPrng(5), counts, 2);
    expect(planFaults(createPrng(5), counts, 2)).toEqual(a);
    expect(planFaults(createPrng(6), counts, 2)).not.toEqual(a);
    const usable = FAULT_KINDS.filter((k) => ((counts as Record<string, number>)[FAULT_POINT[k]] ?? 0) >= 3 && !OPT_IN_KINDS.includes(k));
    // A reshard changes the stream for every query reading it: planned only when asked for.
    expect(a.some((f) => f.kind === 'reshard-mid-run')).toBe(false);
    expect(planFaults(createPrng(5), counts, 2, ['reshard-mid-run']).some((f) => f.kind === 'reshard-mid-run')).toBe(true);
    for (const kind of usable) expect(a.some((f) => f.kind === kind), kind).toBe(true);
    expect(a.length).toBeGreaterThanOrEqual(usable.length);
    // A point met twice only is left alone: its occurrence may not come in a run with faults.
    expect(a.some((f) => f.kind === 'short-get-records')).toBe(false);
    for (const f of a) expect(f.at).toBeLessThanOrEqual(Math.floor(((counts as Record<string, number>)[FAULT_POINT[f.kind]]! - 1) * 0.7));
    expect(new Set(a.map((f) => `${FAULT_POINT[f.kind]}#${f.at}`)).size).toBe(a.length);
  });

  it('an outage whose skipped records then expire is planned for source functions only (a stage reading an internal stream has no re-drive)', () => {
    const counts = { invocation: 20, response: 20 };
    expect(planFaults(createPrng(3), counts, 0).filter((f) => f.kind === 'skipped-then-expired')).toHaveLength(1);
    expect(planFaults(createPrng(3), counts, 6, [], SOURCE_ONLY_KINDS).some((f) => f.kind === 'skipped-then-expired')).toBe(false);
  });

  it('a planned batch whose records expire is planned only when asked for, and for source functions only', () => {
    const counts = { 'offset-write': 20, invocation: 20 };
    expect(planFaults(createPrng(4), counts, 0).some((f) => f.kind === 'planned-then-expired')).toBe(false);
    expect(planFaults(createPrng(4), counts, 0, ['planned-then-expired']).filter((f) => f.kind === 'planned-then-expired')).toHaveLength(1);
    expect(planFaults(createPrng(4), counts, 6, ['planned-then-expired'], SOURCE_ONLY_KINDS).some((f) => f.kind === 'planned-then-expired')).toBe(false);
  });

  it('a planned fault whose occurrence never comes is reported missed', () => {
    const controller = new FaultController([{ kind: 'crash-before-run', at: 1 }, { kind: 'duplicate-delivery', at: 5 }]);
    for (let i = 0; i < 3; i++) controller.hit('invocation', () => `invocation ${i}`);
    expect(controller.injected.map((f) => f.kind)).toEqual(['crash-before-run']);
    expect(controller.missed).toEqual([{ kind: 'duplicate-delivery', at: 5 }]);
  });

  it('a fault postponed (it struck where it cannot act) is not counted as happened and strikes the next free occurrence, or is missed', () => {
    const controller = new FaultController([{ kind: 'zombie-wakes-late', at: 0 }, { kind: 'zombie-wakes-late', at: 2 }]);
    const first = controller.hit('sink-attempt', () => 'batch 0')!;
    controller.postpone(first);
    expect(controller.injected).toEqual([]);
    expect(controller.hit('sink-attempt', () => 'batch 1')).toMatchObject({ at: 0 });
    expect(controller.hit('sink-attempt', () => 'batch 2')).toMatchObject({ at: 2 });
    controller.postpone(controller.injected[1]!);
    expect(controller.injected.map((f) => f.detail)).toEqual(['batch 1']);
    expect(controller.missed).toEqual([{ kind: 'zombie-wakes-late', at: 2 }]);
  });
});
