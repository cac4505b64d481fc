/**
 * The DynamoDB sink's row limits are a pure check (no request), and a batch holding a row that
 * breaks one writes nothing: the issue measured a row of a failed batch left in the table.
 */
import { describe, expect, it } from 'vitest';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDbUpsertSink, MAX_ITEM_BYTES } from '../../lib/aws/dynamodb-upsert-sink.js';
import { UnwritableRowsError } from '../../lib/sinks/row-limits.js';
import type { SinkBatch } from '../../lib/sinks/sink.js';
import { arrayOf, type DataType } from '../../lib/plan/data-types.js';

function sinkWithCalls(keyColumns: string[] = ['k']): { sink: DynamoDbUpsertSink; calls: () => number } {
  let calls = 0;
  const client = { send: async () => { calls++; return {}; } } as unknown as DynamoDBClient;
  return { sink: new DynamoDbUpsertSink({ client, tableName: 't', keyColumns }), calls: () => calls };
}

const batch = (rows: unknown[][], valueType: DataType = 'string'): SinkBatch => ({
  batchId: 3, columns: ['k', 'v'], rows, outputMode: 'update', partitionId: 'shard-0',
  schema: [{ name: 'k', type: 'string' }, { name: 'v', type: valueType }],
});

describe('DynamoDbUpsertSink row limits', () => {
  it('a key over 2048 bytes (UTF-8), an item over 400 KB, lists nested over 32 levels: each refused with its limit and no value', () => {
    const { sink, calls } = sinkWithCalls();
    const nested = Array.from({ length: 40 }).reduce<unknown>((inner) => [inner], 'leaf');
    let nestedType: DataType = 'string';
    for (let i = 0; i < 40; i++) nestedType = arrayOf(nestedType);
    const b = batch([['é'.repeat(1100), 'v'], ['ok', 'w'.repeat(MAX_ITEM_BYTES)], ['fine', 'small']]);
    expect(sink.rowLimits.check(b, 0)).toEqual({ code: 'SINK_KEY_TOO_LONG', reason: expect.stringMatching(/is 2202 bytes, over DynamoDB's partition-key limit of 2048 bytes/) });
    expect(sink.rowLimits.check(b, 1)).toEqual({ code: 'SINK_ITEM_TOO_LARGE', reason: expect.stringMatching(/over its 400 KB item limit \(409600 bytes\)/) });
    expect(sink.rowLimits.check(b, 2)).toBeNull();
    expect(sink.rowLimits.check(batch([['n', nested]], nestedType), 0)).toMatchObject({ code: 'SINK_VALUE_NOT_ENCODABLE' });
    for (const i of [0, 1]) expect(sink.rowLimits.check(b, i)!.reason).not.toMatch(/éé|ww/);
    expect(calls()).toBe(0);
  });

  it('the limit is the item as DynamoDB counts it: just under 400 KB is stored, one byte more is not', () => {
    const { sink } = sinkWithCalls();
    // Attribute names count: k, v, pk, _partition, _batchId and their values.
    const overhead = 'k'.length + 'x'.length + 'v'.length + 'pk'.length + 'k=x'.length + '_partition'.length + 'shard-0'.length + '_batchId'.length + 2;
    const fits = 'w'.repeat(MAX_ITEM_BYTES - overhead);
    expect(sink.rowLimits.check(batch([['x', fits]]), 0)).toBeNull();
    expect(sink.rowLimits.check(batch([['x', `${fits}w`]]), 0)).toMatchObject({ code: 'SINK_ITEM_TOO_LARGE' });
  });

  it('a batch with one refused row writes none of its rows', async () => {
    const { sink, calls } = sinkWithCalls();
    const write = sink.addBatch(batch([['a', '1'], ['b', 'w'.repeat(MAX_ITEM_BYTES)], ['c', '3']]));
    await expect(write).rejects.toBeInstanceOf(UnwritableRowsError);
    await expect(write).rejects.toMatchObject({ code: 'SINK_ROWS_UNWRITABLE', retryable: false, rows: [expect.objectContaining({ rowIndex: 1 })] });
    expect(calls()).toBe(0);
    await sink.addBatch(batch([['a', '1'], ['c', '3']]));
    expect(calls()).toBe(2);
  });

  it('a keyless (append) row is named by its values, so a re-run without some rows names it the same', () => {
    const { sink } = sinkWithCalls([]);
    const rows = [['a', '1'], ['b', '2']];
    const append = { ...batch(rows), outputMode: 'append' as const };
    const without = { ...append, rows: [rows[1]!] };
    expect(sink.rowLimits.rowKey(append, 1)).toBe(sink.rowLimits.rowKey(without, 0));
    expect(sink.rowLimits.rowKey(append, 0)).not.toBe(sink.rowLimits.rowKey(append, 1));
  });
});

describe("DynamoDbUpsertSink with onUnwritableRow: 'spill'", () => {
  const three = (rows: unknown[][]): SinkBatch => ({
    batchId: 1, columns: ['k', 'a', 'b'], rows, outputMode: 'update', partitionId: 'shard-0',
    schema: [{ name: 'k', type: 'string' }, { name: 'a', type: 'string' }, { name: 'b', type: 'string' }],
  });

  it('an item over 400 KB is accepted; its largest values move to S3 until it fits, before any PutItem; the key stays', async () => {
    const sent: { name: string; input: Record<string, unknown> }[] = [];
    const recorder = {
      send: async (c: { constructor: { name: string }; input: Record<string, unknown> }) => {
        sent.push({ name: c.constructor.name, input: c.input });
        // No tombstone: the spill collector has not marked the key.
        if (c.constructor.name === 'HeadObjectCommand') throw Object.assign(new Error('not found'), { name: 'NotFound', $metadata: { httpStatusCode: 404 } });
        return {};
      },
    };
    const sink = new DynamoDbUpsertSink({
      client: recorder as unknown as DynamoDBClient, tableName: 't', keyColumns: ['k'],
      spill: { client: recorder as never, bucket: 'b', prefix: 'q/' },
    });
    const row = ['key', 'a'.repeat(250 * 1024), 'b'.repeat(200 * 1024)];
    expect(sink.rowLimits.check(three([row]), 0)).toBeNull();
    // The same check without spill refuses it: the policy is what makes it storable.
    expect(sinkWithCalls().sink.rowLimits.check(three([row]), 0)).toMatchObject({ code: 'SINK_ITEM_TOO_LARGE' });
    await sink.addBatch(three([row]));
    // The tombstone look-up, then the object, then the item.
    expect(sent.map((s) => s.name)).toEqual(['HeadObjectCommand', 'PutObjectCommand', 'PutItemCommand']);
    expect(sent[0]!.input.Key).toMatch(/^q\/_sluice_spill_tombstones\/[0-9a-f]{64}\.json$/);
    expect(sent[1]!.input.Key).toMatch(/^q\/_sluice_spill\/[0-9a-f]{64}\.json$/);
    const item = sent[2]!.input.Item as Record<string, { S?: string; M?: Record<string, { S: string }> }>;
    expect(Object.keys(item._spilled!.M!)).toEqual(['a']);
    expect(item._spilled!.M!.a!.S).toBe(`s3://b/${sent[1]!.input.Key as string}`);
    expect(item.b!.S!.length).toBe(200 * 1024);
    expect(item.k!.S).toBe('key');
    expect(item.a).toBeUndefined();
  });

  it("a result column named _spilled is refused (the sink's own attribute)", async () => {
    const { sink } = sinkWithCalls();
    const b: SinkBatch = { ...batch([['x', 'y']]), columns: ['k', '_spilled'], schema: [{ name: 'k', type: 'string' }, { name: '_spilled', type: 'string' }] };
    await expect(sink.addBatch(b)).rejects.toMatchObject({ code: 'SINK_RESERVED_COLUMN' });
  });
});
