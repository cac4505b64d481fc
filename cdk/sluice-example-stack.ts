/**
 * SluiceExampleStack: seed 003's pipeline, hourly sales per store, deployed three ways on one
 * shared stream (one event source mapping per query), and hourly sales per product on the same
 * stream through a repartition stage:
 *
 *   append   → S3 files     (examples/hourly-sales-archive.ts): each closed hour once, an archive
 *   update   → DynamoDB     (examples/hourly-sales-live.ts): one item per (hour, store), kept current
 *   complete → S3 snapshot  (examples/hourly-sales-snapshot.ts): the whole table, replaced per batch
 *   update   → DynamoDB     (examples/hourly-sales-per-product.ts): one item per (hour, product),
 *                           through an internal stream that routes rows by product (two stages)
 *
 * The producer writes `{ store_id, product, amount, ts }` JSON with `store_id` as the partition
 * key, which the queries declare: the per-store queries are co-partitioned with the stream and run
 * in one stage on any number of shards; the per-product query is not (a product's sales arrive on
 * every shard) and gets the repartition stage on a stream of two or more shards.
 */
import { CfnOutput, Duration, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as kinesis from 'aws-cdk-lib/aws-kinesis';
import * as s3 from 'aws-cdk-lib/aws-s3';
import type { Construct } from 'constructs';
import { fileURLToPath } from 'node:url';
import { SluiceQuery, type SluiceQueryProps } from 'sluice/cdk';
import { acknowledge } from './nag-acknowledgments.js';

export interface SluiceExampleStackProps extends StackProps {
  /**
   * Shards of the sales stream.
   *
   * @default 2
   */
  readonly shardCount?: number;

  /**
   * What happens to the stream, tables and buckets on `cdk destroy`.
   *
   * @default RemovalPolicy.RETAIN
   */
  readonly removalPolicy?: RemovalPolicy;

  /** Settings applied to all four queries (batch size, memory, schedule, ...). */
  readonly queryDefaults?: Partial<Omit<SluiceQueryProps, 'queryModule' | 'stream' | 'sinkBucket' | 'deadLetterBucket'>>;
}

export class SluiceExampleStack extends Stack {
  public readonly salesStream: kinesis.Stream;
  public readonly resultsBucket: s3.Bucket;
  public readonly deadLetterBucket: s3.Bucket;
  public readonly archive: SluiceQuery;
  public readonly live: SluiceQuery;
  public readonly snapshot: SluiceQuery;
  /** Hourly sales per product: a repartition stage on a stream of two or more shards. */
  public readonly perProduct: SluiceQuery;

  constructor(scope: Construct, id: string, props: SluiceExampleStackProps = {}) {
    super(scope, id, props);
    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN;
    const shardCount = props.shardCount ?? 2;

    this.salesStream = new kinesis.Stream(this, 'SalesStream', {
      streamMode: kinesis.StreamMode.PROVISIONED,
      shardCount,
      retentionPeriod: Duration.hours(24),
      encryption: kinesis.StreamEncryption.MANAGED,
      removalPolicy,
    });
    const bucketProps: s3.BucketProps = {
      encryption: s3.BucketEncryption.S3_MANAGED,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      versioned: false,
      removalPolicy,
    };
    this.resultsBucket = new s3.Bucket(this, 'ResultsBucket', bucketProps);
    this.deadLetterBucket = new s3.Bucket(this, 'DeadLetterBucket', bucketProps);
    for (const bucket of [this.resultsBucket, this.deadLetterBucket]) {
      acknowledge(bucket, 'AwsSolutions-S1',
        'Example stack: server access logging is left out to keep the example small; only the pipeline\'s function roles '
        + 'use this bucket. Production deployments pass an access-log bucket.');
    }

    const shared = {
      // Dead letters hold raw records (possibly personal data): each query's expire, as in a bucket the construct creates.
      deadLetterRetention: Duration.days(30),
      ...props.queryDefaults,
      stream: this.salesStream,
      expectedShardCount: shardCount,
      deadLetterBucket: this.deadLetterBucket,
      removalPolicy,
    };
    const example = (name: string): string => fileURLToPath(new URL(`../examples/${name}`, import.meta.url));
    this.archive = new SluiceQuery(this, 'HourlySalesArchive', {
      ...shared, queryModule: example('hourly-sales-archive.ts'), sinkBucket: this.resultsBucket,
    });
    this.live = new SluiceQuery(this, 'HourlySalesLive', {
      ...shared, queryModule: example('hourly-sales-live.ts'),
    });
    this.snapshot = new SluiceQuery(this, 'HourlySalesSnapshot', {
      ...shared, queryModule: example('hourly-sales-snapshot.ts'), sinkBucket: this.resultsBucket,
    });
    this.perProduct = new SluiceQuery(this, 'HourlySalesPerProduct', {
      ...shared, queryModule: example('hourly-sales-per-product.ts'),
    });

    // What a producer, a reader and an operator need (docs/deploy.md uses them).
    new CfnOutput(this, 'SalesStreamName', { value: this.salesStream.streamName });
    new CfnOutput(this, 'ResultsBucketName', { value: this.resultsBucket.bucketName });
    new CfnOutput(this, 'DeadLetterBucketName', { value: this.deadLetterBucket.bucketName });
    new CfnOutput(this, 'LiveTableName', { value: this.live.sinkTable!.tableName });
    new CfnOutput(this, 'PerProductTableName', { value: this.perProduct.sinkTable!.tableName });
    if (this.perProduct.repartitionStream) {
      new CfnOutput(this, 'PerProductRepartitionStreamName', { value: this.perProduct.repartitionStream.streamName });
    }
    for (const [name, query] of [['Archive', this.archive], ['Live', this.live], ['Snapshot', this.snapshot], ['PerProduct', this.perProduct]] as const) {
      new CfnOutput(this, `${name}ScheduledFunctionName`, { value: query.scheduledTriggerFunction.functionName });
      new CfnOutput(this, `${name}OnFailureQueueUrl`, { value: query.onFailureQueue.queueUrl });
    }
  }
}
