/**
 * The AWS SDK v3 clients Sluice's adapters use, built in one place so an endpoint override
 * (emulators, LocalStack) and the cost meter apply to all of them.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { KinesisClient } from '@aws-sdk/client-kinesis';
import { S3Client } from '@aws-sdk/client-s3';
import { NodeHttpHandler } from '@smithy/node-http-handler';

export interface AwsEndpoints {
  readonly kinesis?: string;
  readonly dynamodb?: string;
  readonly s3?: string;
}

export interface AwsClientOptions {
  readonly region?: string;
  /** Per-service endpoints (emulators); unset services use `AWS_ENDPOINT_URL` or AWS itself. */
  readonly endpoints?: AwsEndpoints;
  readonly credentials?: { accessKeyId: string; secretAccessKey: string };
  /** SDK retry attempts; the runtime retries whole batches itself, so keep this small. */
  readonly maxAttempts?: number;
}

export interface AwsClients {
  readonly kinesis: KinesisClient;
  readonly dynamodb: DynamoDBClient;
  readonly s3: S3Client;
  destroy(): void;
}

export function createAwsClients(options: AwsClientOptions = {}): AwsClients {
  const region = options.region ?? process.env.AWS_REGION ?? 'us-east-1';
  const common = {
    region,
    maxAttempts: options.maxAttempts ?? 3,
    ...(options.credentials ? { credentials: options.credentials } : {}),
  };
  // Kinesis emulators (kinesis-mock, LocalStack) break on the SDK's HTTP/2 handler; HTTP/1.1 works
  // everywhere, AWS included, for the request/response calls Sluice makes.
  const kinesis = new KinesisClient({
    ...common,
    ...(options.endpoints?.kinesis ? { endpoint: options.endpoints.kinesis } : {}),
    requestHandler: new NodeHttpHandler({ connectionTimeout: 5_000, requestTimeout: 30_000 }),
  });
  const dynamodb = new DynamoDBClient({
    ...common,
    ...(options.endpoints?.dynamodb ? { endpoint: options.endpoints.dynamodb } : {}),
  });
  const s3 = new S3Client({
    ...common,
    ...(options.endpoints?.s3 ? { endpoint: options.endpoints.s3, forcePathStyle: true } : {}),
  });
  return {
    kinesis, dynamodb, s3,
    destroy() { kinesis.destroy(); dynamodb.destroy(); s3.destroy(); },
  };
}
