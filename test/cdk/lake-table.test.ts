/**
 * SluiceQuery's `lakeTable`: a Glue table over the s3-files sink with columns from the result
 * schema and partition projection, and a read grant.
 */
import { Template } from 'aws-cdk-lib/assertions';
import * as iam from 'aws-cdk-lib/aws-iam';
import { describe, expect, it } from 'vitest';
import { SluiceQuery } from '../../cdk/sluice-query.js';
import { example, fixture, testStack } from './support.js';

describe('SluiceQuery lakeTable', () => {
  it('creates a database and a Parquet table: result columns, partition keys with injected projection, the sink prefix as location', () => {
    const stack = testStack();
    const query = new SluiceQuery(stack, 'Lake', { queryModule: fixture('lake-parquet.ts'), lakeTable: true, expectedShardCount: 1 });
    const template = Template.fromStack(stack);
    template.resourceCountIs('AWS::Glue::Database', 1);
    const table = Object.values(template.findResources('AWS::Glue::Table'))[0] as { Properties: { TableInput: Record<string, any> } };
    const input = table.Properties.TableInput;
    expect(input.Name).toBe('hourly_sales_lake');
    expect(input.PartitionKeys).toEqual([{ Name: 'store_id', Type: 'string' }]);
    expect(input.StorageDescriptor.Columns).toEqual([
      { Name: 'window', Type: 'struct<start:timestamp,end:timestamp>' },
      { Name: 'sales', Type: 'double' },
      { Name: 'orders', Type: 'bigint' },
    ]);
    expect(input.StorageDescriptor.SerdeInfo.SerializationLibrary).toBe('org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe');
    expect(input.Parameters['projection.enabled']).toBe('true');
    expect(input.Parameters['projection.store_id.type']).toBe('injected');
    expect(JSON.stringify(input.Parameters['storage.location.template'])).toContain('/lake/sales/store_id=${store_id}/');
    expect(query.lakeTable!.athenaQuery()).toBe('SELECT * FROM "hourly_sales_lake"."hourly_sales_lake" LIMIT 10;');
  });

  it('grants a reader the catalog and the sink prefix, and takes a projection per partition column', () => {
    const stack = testStack();
    const query = new SluiceQuery(stack, 'Lake', {
      queryModule: fixture('lake-parquet.ts'), expectedShardCount: 1,
      lakeTable: { databaseName: 'analytics', projection: { store_id: { type: 'enum', values: 'north,south' } } },
    });
    const reader = new iam.Role(stack, 'Analyst', { assumedBy: new iam.AccountRootPrincipal() });
    query.lakeTable!.grantRead(reader);
    const template = Template.fromStack(stack);
    template.resourceCountIs('AWS::Glue::Database', 0);
    const input = (Object.values(template.findResources('AWS::Glue::Table'))[0] as { Properties: { DatabaseName: string; TableInput: Record<string, any> } });
    expect(input.Properties.DatabaseName).toBe('analytics');
    expect(input.Properties.TableInput.Parameters['projection.store_id.values']).toBe('north,south');
    const policy = JSON.stringify(template.findResources('AWS::IAM::Policy'));
    expect(policy).toContain('glue:GetPartitions');
    expect(policy).toContain('table/analytics/hourly_sales_lake');
    expect(policy).toContain('/lake/sales/*');
  });

  it('is refused for a sink other than s3-files', () => {
    expect(() => new SluiceQuery(testStack(), 'Live', { queryModule: example('hourly-sales-live.ts'), lakeTable: true }))
      .toThrow(/lakeTable is for the s3-files sink/);
  });
});
