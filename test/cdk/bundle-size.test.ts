/**
 * The functions' bundles as the SluiceQuery construct builds them (NodejsFunction running esbuild
 * locally, as `cdk synth` does): each at most MAX_BUNDLE_BYTES, its source map beside it rather
 * than inlined, the AWS SDK left to the runtime, and one bundle per trigger kind. Bytes are
 * deterministic for the pinned dependencies, so the bound is asserted; time is not measured here
 * (bench/bundles.bench.ts).
 */
import { App, type Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_BUNDLE_BYTES } from '../../cdk/bundling.js';
import { SluiceQuery } from '../../cdk/sluice-query.js';
import { appOutdir, example, testStack } from './support.js';

interface Bundle { readonly fn: string; readonly code: string; readonly map: string }

/** Each function's bundled asset directory in the cloud assembly (its Code's asset hash). */
function bundlesOf(stack: Stack, outdir: string): Bundle[] {
  const functions = Template.fromStack(stack).findResources('AWS::Lambda::Function') as Record<string, { Properties: { Code: { S3Key: string } } }>;
  return Object.entries(functions).map(([id, fn]) => {
    const dir = join(outdir, `asset.${fn.Properties.Code.S3Key.replace(/\.zip$/, '')}`);
    return { fn: id, code: join(dir, 'index.js'), map: join(dir, 'index.js.map') };
  });
}

describe('the functions\' bundles, built by the construct', () => {
  let bundles: Bundle[];

  beforeAll(() => {
    const outdir = appOutdir();
    // Bundling on (the default app context), unlike the other CDK tests.
    const stack = testStack(new App({ builtinCloudFormationValidation: false, outdir }));
    new SluiceQuery(stack, 'Live', { queryModule: example('hourly-sales-live.ts') });
    new SluiceQuery(stack, 'Archive', { queryModule: example('hourly-sales-archive.ts') });
    new SluiceQuery(stack, 'PerProduct', { queryModule: example('hourly-sales-per-product.ts'), shardCount: 2 });
    bundles = bundlesOf(stack, outdir);
  }, 600_000);

  it('builds one bundle per function: kinesis, scheduled and repartition triggers', () => {
    expect(bundles.map((b) => b.fn).sort()).toEqual(expect.arrayContaining([
      expect.stringMatching(/^LiveKinesisTrigger/), expect.stringMatching(/^LiveScheduledTrigger/),
      expect.stringMatching(/^PerProductRepartitionTrigger/),
    ]));
    for (const b of bundles) expect(existsSync(b.code), b.fn).toBe(true);
    // The trigger kinds' entries import different factories, so their bundles differ.
    const live = bundles.filter((b) => b.fn.startsWith('Live')).map((b) => readFileSync(b.code, 'utf8'));
    expect(new Set(live).size).toBe(live.length);
  });

  it(`keeps every bundle at most ${MAX_BUNDLE_BYTES} bytes`, () => {
    for (const b of bundles) {
      expect(statSync(b.code).size, b.fn).toBeLessThanOrEqual(MAX_BUNDLE_BYTES);
    }
  });

  it('writes the source map beside the bundle, without its sources and not inlined', () => {
    for (const b of bundles) {
      const code = readFileSync(b.code, 'utf8');
      expect(code.trimEnd().endsWith('//# sourceMappingURL=index.js.map'), b.fn).toBe(true);
      expect(code).not.toContain('sourceMappingURL=data:');
      const map = JSON.parse(readFileSync(b.map, 'utf8')) as { sources: string[]; sourcesContent?: unknown };
      expect(map.sources.length).toBeGreaterThan(0);
      expect(map.sourcesContent).toBeUndefined();
    }
  });

  it('leaves the AWS SDK to the nodejs22.x runtime (required, not bundled)', () => {
    for (const b of bundles) {
      const code = readFileSync(b.code, 'utf8');
      expect(code, b.fn).toMatch(/require\("@aws-sdk\/client-dynamodb"\)/);
      expect(code, b.fn).toMatch(/require\("@aws-sdk\/client-s3"\)/);
      expect(code, b.fn).toMatch(/require\("@smithy\/node-http-handler"\)/);
      // The S3 client's own code (its command names as class names) is not in the bundle.
      expect(code, b.fn).not.toContain('PutBucketLifecycleConfigurationCommand');
      // What is loaded on first use is loaded by require, not by Node's ESM loader (cdk/bundling.ts).
      expect(code, b.fn).not.toMatch(/import\("@aws-sdk/);
    }
  });

  it('bundles each function for its query\'s sink: the other sinks\' code is left out', () => {
    // The functions that run the query (the on-failure function writes to no sink).
    const codeOf = (prefix: string): string[] => bundles.filter((b) => b.fn.startsWith(prefix) && /(Kinesis|Scheduled|Repartition)Trigger/.test(b.fn))
      .map((b) => readFileSync(b.code, 'utf8'));
    // Live and PerProduct write to DynamoDB, Archive to S3 files.
    expect(codeOf('Live').length).toBeGreaterThanOrEqual(2);
    expect(codeOf('Archive').length).toBeGreaterThanOrEqual(2);
    for (const code of [...codeOf('Live'), ...codeOf('PerProduct')]) {
      expect(code).toContain('DynamoDbUpsertSink[');
      expect(code).not.toContain('S3FilesSink[');
      expect(code).not.toContain('S3SnapshotSink[');
    }
    for (const code of codeOf('Archive')) {
      expect(code).toContain('S3FilesSink[');
      expect(code).not.toContain('DynamoDbUpsertSink[');
      expect(code).not.toContain('S3SnapshotSink[');
    }
  });
});

