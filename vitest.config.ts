import { defineConfig } from 'vitest/config';

// `sluice` (the examples, the CDK app) resolves to the TypeScript sources in this repository, not
// to dist/: the `sluice-source` export condition (package.json "exports"; tsconfig customConditions).
const conditions = ['sluice-source'];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
  },
});
