import { describe, expect, it } from 'vitest';
import { defineQuery } from '../../lib/query/query-definition.js';
import { validateQuery } from '../../lib/query/validate-query.js';
import { col, lit } from '../../lib/plan/functions.js';

const query = (sink: Record<string, unknown>, transform = (df: any) => df) => defineQuery({
  name: 'lake', source: { schema: 'dt string, store string, n long' }, transform, outputMode: 'append', sink: sink as never,
});

describe('s3-files sink options at definition', () => {
  it('refuses a partitionBy column not in the result, and a wrong format', () => {
    expect(() => validateQuery(query({ kind: 's3-files', format: 'parquet', partitionBy: ['day'] }))).toThrow(/partitionBy column 'day' is not a column of the result \[dt, store, n\]/);
    expect(() => query({ kind: 's3-files', format: 'orc' })).toThrow(/sink/);
  });

  it('refuses a column Parquet cannot hold, but not in JSON Lines', () => {
    const withNull = (df: any) => df.select(col('dt'), lit(null).as('nothing'));
    expect(() => validateQuery(query({ kind: 's3-files', format: 'parquet' }, withNull))).toThrow(expect.objectContaining({ code: 'UNSUPPORTED_PARQUET_TYPE' }));
    expect(() => validateQuery(query({ kind: 's3-files' }, withNull))).not.toThrow();
  });

  it('gives the catalog shape: data columns and partition keys in Hive types', () => {
    expect(validateQuery(query({ kind: 's3-files', format: 'parquet', partitionBy: ['dt'] })).lakeTable).toEqual({
      format: 'parquet', columns: [{ name: 'store', type: 'string' }, { name: 'n', type: 'bigint' }], partitionKeys: [{ name: 'dt', type: 'string' }],
    });
    expect(validateQuery(query({ kind: 'dynamodb', keyColumns: ['dt'] })).lakeTable).toBeNull();
  });
});

describe('explain of an s3-files query', () => {
  it('says where the files go and how to query them', async () => {
    const { explainQuery } = await import('../../lib/query/validate-query.js');
    const text = explainQuery(query({ kind: 's3-files', format: 'parquet', partitionBy: ['dt'], prefix: 'lake/' }));
    expect(text).toContain('Parquet (snappy) files, append only: s3://<sink bucket>/lake/dt=<value>/part-<shard>-<batch>.parquet');
    expect(text).toContain(`Athena (SluiceQuery with lakeTable: true): SELECT * FROM "lake"."lake" WHERE dt = '...' LIMIT 10;`);
    expect(text).toContain("read_parquet('s3://<sink bucket>/lake/**/*.parquet', hive_partitioning = true)");
  });
});
