/**
 * The Lambda functions' SDK clients: DynamoDB and Kinesis built at init (every first invocation
 * reads the checkpoint, and a stateful stage lists its stream's shards), S3 at its first request
 * (lib/aws/s3-sdk.ts), so a function that writes no S3 object never loads the S3 client.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { KinesisClient } from '@aws-sdk/client-kinesis';
import { awsClientConfigs, type AwsClientOptions } from './client-config.js';
import type { AwsClients } from './clients.js';
import { s3ClientOnFirstUse } from './s3-sdk.js';

export function createFunctionClients(options: AwsClientOptions = {}): AwsClients {
  const configs = awsClientConfigs(options);
  const kinesis = new KinesisClient(configs.kinesis);
  const dynamodb = new DynamoDBClient(configs.dynamodb);
  const s3 = s3ClientOnFirstUse(configs.s3);
  return {
    kinesis, dynamodb, s3,
    destroy() { kinesis.destroy(); dynamodb.destroy(); s3.destroy(); },
  };
}
