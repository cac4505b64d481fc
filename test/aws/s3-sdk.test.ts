/**
 * The functions' deferred S3 client (lib/aws/s3-sdk.ts): built once, at the first request or when
 * asked for (tracing instruments the built client), and every request goes through that client,
 * its middleware included. A middleware answers in place of S3 (nothing is sent).
 */
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import { builtS3Client, s3ClientOnFirstUse, s3Sdk } from '../../lib/aws/s3-sdk.js';

const config = { region: 'eu-west-3', credentials: { accessKeyId: 'a', secretAccessKey: 'b' } };

describe('s3ClientOnFirstUse', () => {
  it('builds one S3Client with the given configuration, and sends every request through it', async () => {
    const deferred = s3ClientOnFirstUse(config);
    expect(deferred).not.toBeInstanceOf(S3Client);
    const client = await builtS3Client(deferred);
    expect(client).toBeInstanceOf(S3Client);
    expect(await builtS3Client(deferred)).toBe(client);
    expect(await client.config.region()).toBe('eu-west-3');
    const seen: string[] = [];
    client.middlewareStack.add((_next, context) => async () => {
      seen.push(String(context.commandName));
      return { output: { $metadata: {}, KeyCount: 7 }, response: {} };
    }, { step: 'initialize' });
    const page = await deferred.send(new (await s3Sdk()).ListObjectsV2Command({ Bucket: 'b', Prefix: 'p/' }));
    expect(page.KeyCount).toBe(7);
    expect(seen).toEqual(['ListObjectsV2Command']);
    deferred.destroy();
  });

  it('leaves a client built at once as it is', async () => {
    const client = new S3Client(config);
    expect(await builtS3Client(client)).toBe(client);
    client.destroy();
  });

  it('loads the S3 SDK module once: the commands are those of @aws-sdk/client-s3', async () => {
    expect(await s3Sdk()).toBe(await s3Sdk());
    expect((await s3Sdk()).ListObjectsV2Command).toBe(ListObjectsV2Command);
  });
});
