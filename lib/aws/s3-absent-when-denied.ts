/**
 * S3 answers a GET or HEAD of a missing key with 404 only to a caller allowed to list the
 * bucket; the functions may list only under their own prefix (an `s3:prefix` condition, which a
 * GET does not carry), so S3 answers 403 instead. Listing the key itself, which the condition
 * allows, tells a missing object from a real denial.
 */
import type { S3Client } from '@aws-sdk/client-s3';
import { s3Sdk } from './s3-sdk.js';

function isAccessDenied(error: unknown): boolean {
  const e = error as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === 'AccessDenied' || e?.name === 'Forbidden' || e?.$metadata?.httpStatusCode === 403;
}

/** True when `error` is a 403 for a key that a listing shows does not exist. */
export async function absentWhenDenied(client: S3Client, bucket: string, key: string, error: unknown): Promise<boolean> {
  if (!isAccessDenied(error)) return false;
  try {
    const page = await client.send(new (await s3Sdk()).ListObjectsV2Command({ Bucket: bucket, Prefix: key, MaxKeys: 1 }));
    return !(page.Contents ?? []).some((o) => o.Key === key);
  } catch {
    return false; // listing denied too: a real denial, reported as the original error
  }
}
