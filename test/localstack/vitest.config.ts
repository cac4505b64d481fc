import { defineConfig } from 'vitest/config';

// The tests that need a running LocalStack with the example stack deployed on it: run by
// scripts/localstack/test.sh (`npm run test:localstack`), never by `npm test`. Same source
// resolution as the root config.
const conditions = ['sluice-source'];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    root: new URL('../..', import.meta.url).pathname,
    include: ['test/localstack/**/*.localstack.test.ts'],
    testTimeout: 300_000,
    hookTimeout: 300_000,
    pool: 'forks',
  },
});
