/**
 * Data protection knobs of SluiceQuery: dead-letter expiry, customer-managed KMS keys (and the key
 * grants that follow them: only the operations each function performs), deletion protection of
 * the checkpoint and state tables, reserved concurrency.
 */
import { Duration, RemovalPolicy, type Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { describe, expect, it } from 'vitest';
import { SluiceQuery } from '../../cdk/sluice-query.js';
import { asArray, example, fixture, nagViolations, statementsOfRole, testStack } from './support.js';

type Resource = { Properties: Record<string, any> };
const idOf = (stack: Stack, c: { node: { defaultChild?: unknown } }): string => stack.getLogicalId(c.node.defaultChild as never);
const keyActions = (stack: Stack, template: Template, fn: SluiceQuery['kinesisTriggerFunction'], key: kms.Key): string[] =>
  statementsOfRole(template, idOf(stack, fn.role as never))
    .filter((s) => JSON.stringify(s.Resource) === JSON.stringify({ 'Fn::GetAtt': [idOf(stack, key), 'Arn'] }))
    .flatMap((s) => asArray(s.Action)).filter((a, i, all) => all.indexOf(a) === i).sort();

describe('dead letters expire', () => {
  it('by default after 30 days, through a lifecycle rule on the dead-letter prefix', () => {
    const stack = testStack();
    const query = new SluiceQuery(stack, 'Live', { queryModule: example('hourly-sales-live.ts') });
    const bucket = Template.fromStack(stack).findResources('AWS::S3::Bucket')[idOf(stack, query.deadLetterBucket as never)] as Resource;
    expect(bucket.Properties.LifecycleConfiguration).toEqual({
      Rules: [{ Id: 'ExpireDeadLetters', Prefix: 'dead-letter/', ExpirationInDays: 30, Status: 'Enabled' }],
    });
  });

  it('after deadLetterRetention; a retention that is not whole days is refused with the prop named', () => {
    const stack = testStack();
    const query = new SluiceQuery(stack, 'Live', { queryModule: example('hourly-sales-live.ts'), deadLetterRetention: Duration.days(7) });
    const bucket = Template.fromStack(stack).findResources('AWS::S3::Bucket')[idOf(stack, query.deadLetterBucket as never)] as Resource;
    expect(bucket.Properties.LifecycleConfiguration.Rules[0].ExpirationInDays).toBe(7);
    expect(() => new SluiceQuery(testStack(), 'Live', { queryModule: example('hourly-sales-live.ts'), deadLetterRetention: Duration.hours(36) }))
      .toThrow(/deadLetterRetention must be a whole number of days, at least 1.*got 1 day 12 hours/);
  });
});

describe('dead letters in a given bucket', () => {
  it('expire with an explicit deadLetterRetention: one rule per query, on its own prefix only; none without it', () => {
    const stack = testStack();
    const bucket = new s3.Bucket(stack, 'Shared');
    new SluiceQuery(stack, 'Live', { queryModule: example('hourly-sales-live.ts'), deadLetterBucket: bucket, deadLetterRetention: Duration.days(14) });
    new SluiceQuery(stack, 'Large', { queryModule: fixture('large-orders.ts'), deadLetterBucket: bucket, deadLetterRetention: Duration.days(7) });
    const rules = (Template.fromStack(stack).findResources('AWS::S3::Bucket')[idOf(stack, bucket as never)] as Resource).Properties.LifecycleConfiguration.Rules;
    expect(rules).toEqual([
      { Id: 'ExpireDeadLetters-hourly-sales-live', Prefix: 'dead-letter/hourly-sales-live/', ExpirationInDays: 14, Status: 'Enabled' },
      { Id: 'ExpireDeadLetters-large-orders', Prefix: 'dead-letter/large-orders/', ExpirationInDays: 7, Status: 'Enabled' },
    ]);
    const untouched = testStack();
    const own = new s3.Bucket(untouched, 'Own');
    new SluiceQuery(untouched, 'Live', { queryModule: example('hourly-sales-live.ts'), deadLetterBucket: own });
    expect((Template.fromStack(untouched).findResources('AWS::S3::Bucket')[idOf(untouched, own as never)] as Resource).Properties?.LifecycleConfiguration).toBeUndefined();
  });

  it('an imported bucket with a deadLetterRetention is refused (the rule could not be added), naming the prop', () => {
    const stack = testStack();
    const imported = s3.Bucket.fromBucketName(stack, 'Imported', 'someone-elses-bucket');
    expect(() => new SluiceQuery(stack, 'Live', { queryModule: example('hourly-sales-live.ts'), deadLetterBucket: imported, deadLetterRetention: Duration.days(7) }))
      .toThrow(/deadLetterRetention cannot be applied to an imported deadLetterBucket/);
  });
});

describe('customer-managed KMS keys', () => {
  it('encrypt what the construct creates, and each function gets only the key operations it performs', () => {
    const stack = testStack();
    const key = (id: string) => new kms.Key(stack, id, { enableKeyRotation: true });
    const [deadLetterKey, sinkKey, stateKey, streamKey] = [key('DeadLetterKey'), key('SinkKey'), key('StateKey'), key('StreamKey')];
    const query = new SluiceQuery(stack, 'PerProduct', {
      queryModule: example('hourly-sales-per-product.ts'), shardCount: 2,
      deadLetterEncryptionKey: deadLetterKey, sinkEncryptionKey: sinkKey, stateEncryptionKey: stateKey, streamEncryptionKey: streamKey,
    });
    const template = Template.fromStack(stack);
    const keyArn = (k: kms.Key) => ({ 'Fn::GetAtt': [idOf(stack, k), 'Arn'] });
    const buckets = template.findResources('AWS::S3::Bucket');
    const sse = (b: unknown) => (buckets[idOf(stack, b as never)] as Resource).Properties.BucketEncryption.ServerSideEncryptionConfiguration[0];
    expect(sse(query.deadLetterBucket)).toEqual({ ServerSideEncryptionByDefault: { SSEAlgorithm: 'aws:kms', KMSMasterKeyID: keyArn(deadLetterKey) }, BucketKeyEnabled: true });
    const tables = template.findResources('AWS::DynamoDB::Table');
    const tableSse = (t: unknown) => (tables[idOf(stack, t as never)] as Resource).Properties.SSESpecification;
    for (const t of [query.checkpointTable, query.stateTable]) expect(tableSse(t)).toEqual({ SSEEnabled: true, SSEType: 'KMS', KMSMasterKeyId: keyArn(stateKey) });
    const sinkIsTable = query.sinkTable !== undefined;
    if (sinkIsTable) expect(tableSse(query.sinkTable)).toEqual({ SSEEnabled: true, SSEType: 'KMS', KMSMasterKeyId: keyArn(sinkKey) });
    else expect(sse(query.sinkBucket).ServerSideEncryptionByDefault.KMSMasterKeyID).toEqual(keyArn(sinkKey));
    const streams = template.findResources('AWS::Kinesis::Stream');
    for (const s of [query.stream, query.repartitionStream!]) {
      expect((streams[idOf(stack, s as never)] as Resource).Properties.StreamEncryption).toEqual({ EncryptionType: 'KMS', KeyId: keyArn(streamKey) });
    }

    const table = ['kms:Decrypt', 'kms:DescribeKey', 'kms:Encrypt', 'kms:GenerateDataKey'];
    const sinkKeyOps = sinkIsTable ? table : ['kms:Decrypt', 'kms:GenerateDataKey'];
    // Dead letters are only written: GenerateDataKey, never Decrypt.
    for (const fn of query.functions()) expect(keyActions(stack, template, fn, deadLetterKey)).toEqual(['kms:GenerateDataKey']);
    // Stage 1: reads the source stream (Decrypt), writes the internal one (GenerateDataKey); checkpoint only; no sink.
    expect(keyActions(stack, template, query.kinesisTriggerFunction, streamKey)).toEqual(['kms:Decrypt', 'kms:GenerateDataKey']);
    expect(keyActions(stack, template, query.kinesisTriggerFunction, stateKey)).toEqual(table);
    expect(keyActions(stack, template, query.kinesisTriggerFunction, sinkKey)).toEqual([]);
    // Stage 2 reads the internal stream only; lists the source shards (no key needed for that).
    expect(keyActions(stack, template, query.repartitionFunction!, streamKey)).toEqual(['kms:Decrypt']);
    expect(keyActions(stack, template, query.repartitionFunction!, sinkKey)).toEqual(sinkKeyOps);
    expect(keyActions(stack, template, query.scheduledTriggerFunction, streamKey)).toEqual(['kms:Decrypt', 'kms:GenerateDataKey']);
    expect(keyActions(stack, template, query.scheduledTriggerFunction, sinkKey)).toEqual(sinkKeyOps);
    expect(nagViolations(stack)).toEqual([]);
  });

  it('an S3 sink bucket with a key: the sink writers get Decrypt and GenerateDataKey on it', () => {
    const stack = testStack();
    const sinkKey = new kms.Key(stack, 'SinkKey', { enableKeyRotation: true });
    const query = new SluiceQuery(stack, 'Large', { queryModule: fixture('large-orders.ts'), sinkEncryptionKey: sinkKey });
    const template = Template.fromStack(stack);
    for (const fn of query.functions()) expect(keyActions(stack, template, fn, sinkKey)).toEqual(['kms:Decrypt', 'kms:GenerateDataKey']);
    expect(nagViolations(stack)).toEqual([]);
  });
});

describe('deletion protection and reserved concurrency', () => {
  it('protects the checkpoint and state tables from deletion by default (retained as well), not the sink table', () => {
    const stack = testStack();
    const query = new SluiceQuery(stack, 'Live', { queryModule: example('hourly-sales-live.ts') });
    const tables = Template.fromStack(stack).findResources('AWS::DynamoDB::Table');
    for (const t of [query.checkpointTable, query.stateTable]) {
      expect((tables[idOf(stack, t)] as Resource).Properties.DeletionProtectionEnabled).toBe(true);
      expect((tables[idOf(stack, t)] as { DeletionPolicy?: string }).DeletionPolicy).toBe('Retain');
    }
    expect((tables[idOf(stack, query.sinkTable as never)] as Resource).Properties.DeletionProtectionEnabled).toBeUndefined();
  });

  it('turns it off with tableDeletionProtection: false, and by default under RemovalPolicy.DESTROY', () => {
    for (const props of [{ tableDeletionProtection: false }, { removalPolicy: RemovalPolicy.DESTROY }]) {
      const stack = testStack();
      const query = new SluiceQuery(stack, 'Live', { queryModule: example('hourly-sales-live.ts'), ...props });
      const tables = Template.fromStack(stack).findResources('AWS::DynamoDB::Table');
      expect((tables[idOf(stack, query.checkpointTable)] as Resource).Properties.DeletionProtectionEnabled).toBe(false);
    }
  });

  it('reserves concurrency for every function when asked, and refuses a non-positive number', () => {
    const stack = testStack();
    const query = new SluiceQuery(stack, 'PerProduct', { queryModule: example('hourly-sales-per-product.ts'), shardCount: 2, reservedConcurrentExecutions: 4 });
    const functions = Template.fromStack(stack).findResources('AWS::Lambda::Function');
    for (const fn of query.functions()) expect((functions[idOf(stack, fn)] as Resource).Properties.ReservedConcurrentExecutions).toBe(4);
    expect(() => new SluiceQuery(testStack(), 'Live', { queryModule: example('hourly-sales-live.ts'), reservedConcurrentExecutions: 0 }))
      .toThrow(/reservedConcurrentExecutions must be a positive integer, got 0/);
    const plain = testStack();
    const unreserved = new SluiceQuery(plain, 'Live', { queryModule: example('hourly-sales-live.ts') });
    const plainFunctions = Template.fromStack(plain).findResources('AWS::Lambda::Function');
    expect((plainFunctions[idOf(plain, unreserved.kinesisTriggerFunction)] as Resource).Properties.ReservedConcurrentExecutions).toBeUndefined();
  });

  it('logs data values only with debugLogging (POWERTOOLS_LOG_LEVEL=DEBUG)', () => {
    for (const debugLogging of [undefined, true]) {
      const stack = testStack();
      const query = new SluiceQuery(stack, 'Live', { queryModule: example('hourly-sales-live.ts'), debugLogging });
      const functions = Template.fromStack(stack).findResources('AWS::Lambda::Function');
      for (const fn of query.functions()) {
        expect((functions[idOf(stack, fn)] as Resource).Properties.Environment.Variables.POWERTOOLS_LOG_LEVEL).toBe(debugLogging ? 'DEBUG' : undefined);
      }
    }
  });
});
