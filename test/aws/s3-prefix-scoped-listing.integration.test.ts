/**
 * The functions may list the sink bucket only under their prefix (an s3:prefix condition), so AWS
 * answers a GET or HEAD of a missing key with 403, not 404. The S3 helpers must still read such a
 * key as missing (a first batch has no manifest or pointer yet). s3rver does not enforce IAM: the
 * one injected fault is the 403 AWS gives for a missing key; everything else is real s3rver.
 */
import { CreateBucketCommand, GetObjectCommand, HeadObjectCommand, S3ServiceException, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getObjectText, objectExists, putObject } from '../../lib/aws/s3-util.js';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';

let emulators: EmulatorSet;
let clients: AwsClients;
const bucket = `prefix-scoped-${process.pid}`;

beforeAll(async () => {
  emulators = await startEmulators({ kinesis: false, dynamodb: false });
  clients = createAwsClients(emulators.clientOptions);
  await clients.s3.send(new CreateBucketCommand({ Bucket: bucket }));
});

afterAll(async () => {
  clients?.destroy();
  await emulators?.stop();
});

const denied = (): S3ServiceException => new S3ServiceException({ name: 'AccessDenied', $fault: 'client', $metadata: { httpStatusCode: 403 }, message: 'Access Denied' });

/** The real client, except that a GET/HEAD of a missing key (404) comes back as 403, as on AWS without an unconditioned ListBucket. */
function prefixScoped(real: S3Client, options: { listingDenied?: boolean } = {}): S3Client {
  const send = async (command: unknown): Promise<unknown> => {
    if (options.listingDenied && command?.constructor?.name === 'ListObjectsV2Command') throw denied();
    try {
      return await real.send(command as never);
    } catch (error) {
      const missing = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404;
      if (missing && (command instanceof GetObjectCommand || command instanceof HeadObjectCommand)) throw denied();
      throw error;
    }
  };
  return new Proxy(real, { get: (target, property) => (property === 'send' ? send : Reflect.get(target, property)) });
}

describe('S3 reads under a prefix-scoped ListBucket grant', () => {
  it('a missing key is missing (undefined / false), an existing one is read', async () => {
    const s3 = prefixScoped(clients.s3);
    expect(await getObjectText(s3, bucket, 'q/_pointer.json')).toBeUndefined();
    expect(await objectExists(s3, bucket, 'q/_manifests/000000000000.json')).toBe(false);
    await putObject(clients.s3, bucket, 'q/_pointer.json', '{"batch":1}', 'application/json');
    expect(await getObjectText(s3, bucket, 'q/_pointer.json')).toBe('{"batch":1}');
    expect(await objectExists(s3, bucket, 'q/_pointer.json')).toBe(true);
  });

  it('a 403 that listing cannot explain stays an error', async () => {
    const s3 = prefixScoped(clients.s3, { listingDenied: true });
    await expect(getObjectText(s3, bucket, 'other/missing.json')).rejects.toThrow(/Access Denied/);
    await expect(objectExists(s3, bucket, 'other/missing.json')).rejects.toThrow(/Access Denied/);
  });
});
