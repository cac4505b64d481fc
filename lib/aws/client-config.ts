/**
 * The SDK clients' configuration from Sluice's client options, shared by the clients built at once
 * (lib/aws/clients.ts) and the functions' clients (lib/aws/function-clients.ts), so an endpoint
 * override (emulators, LocalStack) applies to all of them alike.
 */
import type { DynamoDBClientConfig } from '@aws-sdk/client-dynamodb';
import type { KinesisClientConfig } from '@aws-sdk/client-kinesis';
import type { S3ClientConfig } from '@aws-sdk/client-s3';
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

export interface AwsClientConfigs {
  readonly kinesis: KinesisClientConfig;
  readonly dynamodb: DynamoDBClientConfig;
  readonly s3: S3ClientConfig;
}

export function awsClientConfigs(options: AwsClientOptions = {}): AwsClientConfigs {
  const region = options.region ?? process.env.AWS_REGION ?? 'us-east-1';
  const common = {
    region,
    maxAttempts: options.maxAttempts ?? 3,
    ...(options.credentials ? { credentials: options.credentials } : {}),
  };
  return {
    // Kinesis emulators (kinesis-mock, LocalStack) break on the SDK's HTTP/2 handler; HTTP/1.1 works
    // everywhere, AWS included, for the request/response calls Sluice makes.
    kinesis: {
      ...common,
      ...(options.endpoints?.kinesis ? { endpoint: options.endpoints.kinesis } : {}),
      requestHandler: new NodeHttpHandler({ connectionTimeout: 5_000, requestTimeout: 30_000 }),
    },
    dynamodb: {
      ...common,
      ...(options.endpoints?.dynamodb ? { endpoint: options.endpoints.dynamodb } : {}),
    },
    s3: {
      ...common,
      ...(options.endpoints?.s3 ? { endpoint: options.endpoints.s3, forcePathStyle: true } : {}),
    },
  };
}
