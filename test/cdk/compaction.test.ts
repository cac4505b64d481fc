/**
 * SluiceQuery's `compaction`: on by default for an s3-files sink, its settings passed to the
 * scheduled function's environment, the scheduled function able to list, read, write and delete
 * under the sink prefix; refused for other sinks and for a minAge the timeout could overlap.
 */
import { Duration, Size, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { SluiceQuery } from '../../cdk/sluice-query.js';
import { RUNTIME_ENV } from '../../lib/runtime/runtime-config.js';
import { example, fixture, testStack } from './support.js';

function scheduledEnv(query: SluiceQuery): Record<string, string> {
  const template = Template.fromStack(Stack.of(query));
  const id = Stack.of(query).getLogicalId(query.scheduledTriggerFunction.node.defaultChild as never);
  return (template.toJSON().Resources[id].Properties.Environment.Variables) as Record<string, string>;
}

describe('SluiceQuery compaction', () => {
  it('is on by default for an s3-files sink: 128 MiB files after one hour, and the scheduled function may list, read, write and delete the sink prefix', () => {
    const query = new SluiceQuery(testStack(), 'Lake', { queryModule: fixture('lake-parquet.ts'), expectedShardCount: 1 });
    const env = scheduledEnv(query);
    expect(env[RUNTIME_ENV.compaction]).toBe('true');
    expect(env[RUNTIME_ENV.compactionTargetBytes]).toBe(String(128 * 1024 * 1024));
    expect(env[RUNTIME_ENV.compactionMinAgeMs]).toBe('3600000');
    const role = Stack.of(query).getLogicalId(query.scheduledTriggerFunction.role!.node.defaultChild as never);
    const policies = Object.values(Template.fromStack(Stack.of(query)).findResources('AWS::IAM::Policy'))
      .filter((p) => JSON.stringify(p).includes(role));
    const statements = policies.flatMap((p) => (p as { Properties: { PolicyDocument: { Statement: { Action: string | string[]; Resource: unknown }[] } } }).Properties.PolicyDocument.Statement);
    const onPrefix = statements.filter((s) => JSON.stringify(s.Resource).includes('/lake/sales/*')).flatMap((s) => [s.Action].flat());
    expect(onPrefix).toEqual(expect.arrayContaining(['s3:GetObject', 's3:PutObject', 's3:DeleteObject']));
    expect(statements.some((s) => [s.Action].flat().includes('s3:ListBucket'))).toBe(true);
  });

  it('takes a target size and a minimum age, and can be turned off', () => {
    const tuned = new SluiceQuery(testStack(), 'Lake', {
      queryModule: fixture('lake-parquet.ts'), expectedShardCount: 1, timeout: Duration.minutes(5),
      compaction: { targetSize: Size.mebibytes(64), minAge: Duration.minutes(30) },
    });
    expect(scheduledEnv(tuned)[RUNTIME_ENV.compactionTargetBytes]).toBe(String(64 * 1024 * 1024));
    expect(scheduledEnv(tuned)[RUNTIME_ENV.compactionMinAgeMs]).toBe('1800000');
    const off = new SluiceQuery(testStack(), 'Lake', { queryModule: fixture('lake-parquet.ts'), expectedShardCount: 1, compaction: false });
    expect(scheduledEnv(off)[RUNTIME_ENV.compaction]).toBe('false');
  });

  it('is refused for a minAge not longer than the timeout, and for a sink other than s3-files', () => {
    expect(() => new SluiceQuery(testStack(), 'Lake', {
      queryModule: fixture('lake-parquet.ts'), expectedShardCount: 1, timeout: Duration.minutes(5), compaction: { minAge: Duration.minutes(5) },
    })).toThrow(/compaction.minAge \(5 minutes\) must exceed the functions' timeout/);
    expect(() => new SluiceQuery(testStack(), 'Live', { queryModule: example('hourly-sales-live.ts'), compaction: {} }))
      .toThrow(/compaction is for the s3-files sink/);
    const live = new SluiceQuery(testStack(), 'Live', { queryModule: example('hourly-sales-live.ts') });
    expect(scheduledEnv(live)[RUNTIME_ENV.compaction]).toBeUndefined();
  });
});
