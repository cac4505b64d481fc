/**
 * The integration project's globalSetup: one set of embedded emulators (kinesis-mock, DynamoDB
 * Local, s3rver) for the whole run instead of one per test file. A DynamoDB Local start is a JVM
 * start (5–6 s quiet, far more loaded, and its first requests run before the JIT has warmed up);
 * ~70 files each paid it. The files already isolate by resource names and clean up after
 * themselves: under LocalStack (`npm run test:localstack`) they all share one endpoint set.
 * test/support/shared-emulators.setup.ts hands this set to each file's `startEmulators`.
 *
 * Under LocalStack (AWS_ENDPOINT_URL set) nothing starts: every file uses that endpoint anyway.
 */
import type { TestProject } from 'vitest/node';
import type { AwsClientOptions } from '../../lib/aws/clients.js';
import { startEmulators } from '../../lib/local/emulators.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The run's shared emulators' endpoints; absent under LocalStack or before they start. */
    sharedEmulators: { clientOptions: AwsClientOptions } | null;
  }
}

export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  if (process.env.AWS_ENDPOINT_URL) { project.provide('sharedEmulators', null); return undefined; }
  const emulators = await startEmulators();
  project.provide('sharedEmulators', { clientOptions: emulators.clientOptions });
  return () => emulators.stop();
}
