/**
 * session.read on local files: JSON Lines and Parquet to static DataFrames, the schema given or
 * inferred as Spark infers JSON; a record that does not fit fails the read with its place. (S3 and
 * DynamoDB: test/aws/static-storage.integration.test.ts.)
 */
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import { col, count, sum } from '../../lib/plan/functions.js';
import { encodeParquet } from '../../lib/sinks/parquet-format.js';
import type { StructField } from '../../lib/plan/data-types.js';
import { addData, checkNewAnswer, testStream } from '../../lib/testing/test-stream.js';

const dir = mkdtempSync(join(tmpdir(), 'sluice-read-'));
const file = (name: string, text: string | Uint8Array): string => {
  const path = join(dir, name);
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, text);
  return path;
};

describe('session.read.json (JSON Lines)', () => {
  it("infers Spark's schema: long, double, boolean, string, struct, array; fields sorted; a field of mixed types is string", async () => {
    const path = file('users.jsonl', [
      '{"id": 1, "name": "ann", "score": 2, "tags": ["a"], "addr": {"zip": "75001", "city": "Paris"}, "vip": true, "mixed": 1}',
      '',
      '{"id": 9007199254740993, "name": "bob", "score": 2.5, "tags": [], "vip": false, "mixed": "x"}',
    ].join('\n'));
    const df = await new SluiceSession().read.json(path);
    expect(df.isStreaming).toBe(false);
    expect(df.schema).toEqual([
      { name: 'addr', type: 'struct<city:string,zip:string>' }, { name: 'id', type: 'long' }, { name: 'mixed', type: 'string' },
      { name: 'name', type: 'string' }, { name: 'score', type: 'double' }, { name: 'tags', type: 'array<string>' }, { name: 'vip', type: 'boolean' },
    ]);
    expect(df.select('id', 'name', 'score', 'addr.city', 'mixed').collect()).toEqual([[1, 'ann', 2, 'Paris', '1'], [9007199254740993n, 'bob', 2.5, null, 'x']]);
  });

  it('every file under a folder, hidden ones (_SUCCESS, _sluice_staging/, .crc) left out; a given schema is used as is', async () => {
    file('sales/part-1.jsonl', '{"store": "s1", "amount": 3, "ts": "2024-01-01 10:00:00"}\n');
    file('sales/day=2/part-2.jsonl', '{"store": "s2", "amount": 4, "ts": "2024-01-02T10:00:00Z"}\n');
    file('sales/_SUCCESS', 'not json');
    file('sales/_sluice_staging/part-9.jsonl', '{"store": "staged", "amount": 100}\n');
    file('sales/.part-1.jsonl.crc', 'junk');
    const df = await new SluiceSession().read.schema('store string, amount int, ts timestamp').json(join(dir, 'sales'));
    expect(df.schema.map((f) => f.type)).toEqual(['string', 'int', 'timestamp']);
    expect(df.collect()).toEqual([['s2', 4, Date.parse('2024-01-02T10:00:00Z') * 1000], ['s1', 3, Date.parse('2024-01-01T10:00:00Z') * 1000]]);
  });

  it('a line that is not JSON, or a value that does not fit the schema, fails the read naming the file and line', async () => {
    const bad = file('bad.jsonl', '{"a": 1}\n{"a": 2\n');
    await expect(new SluiceSession().read.json(bad)).rejects.toThrow(new RegExp(`Malformed record at ${bad}:2: not JSON`));
    const typed = file('typed.jsonl', '{"a": 1}\n\n{"a": "x"}\n');
    await expect(new SluiceSession().read.schema('a long').json(typed)).rejects.toThrow(new RegExp(`Malformed record at ${typed}:3: .*a`));
  });

  it("a missing path is Spark's PATH_NOT_FOUND; an s3:// location needs a session storage", async () => {
    await expect(new SluiceSession().read.json(join(dir, 'nope'))).rejects.toThrow(/\[PATH_NOT_FOUND\] Path does not exist/);
    expect((await new SluiceSession().read.schema('a long').json(join(dir, 'nope'))).count()).toBe(0);
    await expect(new SluiceSession().read.json('s3://bucket/users/')).rejects.toThrow(/the session has no storage for S3 or DynamoDB[\s\S]*awsStaticStorage/);
  });
});

describe('session.read.parquet', () => {
  it("reads the files sink's Parquet back: columns in file order, longs, timestamps, structs, lists, NULLs", async () => {
    const fields: StructField[] = [
      { name: 'store', type: 'string' }, { name: 'amount', type: 'long' }, { name: 'ts', type: 'timestamp' },
      { name: 'tags', type: { kind: 'array', element: 'string' } }, { name: 'price', type: 'double' },
    ];
    const rows = [['s1', 5, 1_704_103_200_123_456, ['x', 'y'], 1.5], ['s2', null, 1_704_103_300_000_000, [], null]];
    const path = file('lake/store=1/part-0.parquet', encodeParquet(rows, fields, [0, 1, 2, 3, 4]));
    const df = await new SluiceSession().read.parquet(join(dir, 'lake'));
    expect(df.schema).toEqual([
      { name: 'store', type: 'string' }, { name: 'amount', type: 'long' }, { name: 'ts', type: 'timestamp' }, { name: 'tags', type: 'array<string>' }, { name: 'price', type: 'double' },
    ]);
    expect(df.collect()).toEqual(rows);
    await expect(new SluiceSession().read.parquet(file('lake2/x.parquet', 'not parquet'))).rejects.toThrow(/x\.parquet: not a Parquet file/);
    expect(path).toContain('store=1');
  });
});

describe('a stream-static join with data read from files', () => {
  it('enriches each micro-batch with the static table (inner and left outer, stream on the left)', async () => {
    const stores = await new SluiceSession().read.json(file('stores.jsonl', '{"store": "s1", "city": "Paris"}\n{"store": "s2", "city": "Lyon"}\n'));
    const { stream, df } = new SluiceSession().memoryStream('store string, amount long');
    const perCity = df.join(stores, 'store', 'left').groupBy(col('city')).agg(sum('amount').as('total'), count('*').as('n'));
    await testStream(perCity, 'update')(
      addData(stream, ['s1', 3], ['s2', 4], ['s9', 1]), checkNewAnswer(['Paris', 3, 1], ['Lyon', 4, 1], [null, 1, 1]),
      addData(stream, ['s1', 10]), checkNewAnswer(['Paris', 13, 2]),
    );
  });
});
