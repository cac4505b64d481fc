/**
 * One s3rver for a test file (no Kinesis, no DynamoDB), its clients, and fresh buckets named from a
 * prefix, all deleted after the file. Registers the file's beforeAll/afterAll hooks.
 */
import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll } from 'vitest';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { deleteResourcesNamed } from './cleanup.js';

export interface S3Emulator {
  /** Valid inside tests (set by beforeAll). */
  readonly emulators: EmulatorSet;
  readonly clients: AwsClients;
  readonly s3: S3Client;
  /** A bucket no other test of the run uses. */
  newBucket(): Promise<string>;
}

export function useS3Emulator(bucketPrefix: string): S3Emulator {
  const namePrefix = `${bucketPrefix}-${process.pid}-`;
  let emulators: EmulatorSet | undefined;
  let clients: AwsClients | undefined;
  let counter = 0;

  beforeAll(async () => {
    emulators = await startEmulators({ kinesis: false, dynamodb: false });
    clients = createAwsClients(emulators.clientOptions);
  });

  afterAll(async () => {
    if (clients) await deleteResourcesNamed(clients, 'buckets', namePrefix);
    clients?.destroy();
    await emulators?.stop();
  });

  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('the S3 emulator is used before beforeAll ran');
    return value;
  };

  return {
    get emulators() { return started(emulators); },
    get clients() { return started(clients); },
    get s3() { return started(clients).s3; },
    async newBucket() {
      const bucket = `${namePrefix}${++counter}`;
      await started(clients).s3.send(new CreateBucketCommand({ Bucket: bucket }));
      return bucket;
    },
  };
}
