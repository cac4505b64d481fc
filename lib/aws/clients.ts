/**
 * The AWS SDK v3 clients Sluice's adapters use, built in one place so an endpoint override
 * (emulators, LocalStack) and the cost meter apply to all of them. These are built at once, for
 * the CLI, `sluice dev` and tests; the Lambda functions build theirs with
 * lib/aws/function-clients.ts, which defers S3 to its first use.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { KinesisClient } from '@aws-sdk/client-kinesis';
import { S3Client } from '@aws-sdk/client-s3';
import { awsClientConfigs, type AwsClientOptions } from './client-config.js';

export type { AwsClientOptions, AwsEndpoints } from './client-config.js';

export interface AwsClients {
  readonly kinesis: KinesisClient;
  readonly dynamodb: DynamoDBClient;
  readonly s3: S3Client;
  destroy(): void;
}

export function createAwsClients(options: AwsClientOptions = {}): AwsClients {
  const configs = awsClientConfigs(options);
  const kinesis = new KinesisClient(configs.kinesis);
  const dynamodb = new DynamoDBClient(configs.dynamodb);
  const s3 = new S3Client(configs.s3);
  return {
    kinesis, dynamodb, s3,
    destroy() { kinesis.destroy(); dynamodb.destroy(); s3.destroy(); },
  };
}
