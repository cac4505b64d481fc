import { defineConfig } from 'vitest/config';

// `sluice` (the examples, the CDK app) resolves to the TypeScript sources in this repository, not
// to dist/: the `sluice-source` export condition (package.json "exports"; tsconfig customConditions).
const conditions = ['sluice-source'];

// Tests mirror the sources: the test of lib/aws/dynamodb-checkpoint.ts is test/aws/dynamodb-checkpoint*.
// Those that start emulators (Kinesis, DynamoDB Local, S3) or install the packed package end in
// `.integration.test.ts`: `npm run test:unit` runs the rest in seconds, `npm test` runs both.
export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/**/*.test.ts'], exclude: ['test/**/*.integration.test.ts', 'test/localstack/**'] } },
      {
        extends: true,
        test: {
          name: 'integration', include: ['test/**/*.integration.test.ts'],
          // One emulator set for the run, not one per file (test/support/shared-emulators.global.ts).
          globalSetup: ['test/support/shared-emulators.global.ts'], setupFiles: ['test/support/shared-emulators.setup.ts'],
        },
      },
    ],
  },
});
