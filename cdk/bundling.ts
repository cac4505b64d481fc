/**
 * How each Lambda function is bundled: one esbuild build per function from its own generated
 * entry (cdk/generated-entry.ts), so a function carries only what its trigger reaches. The same
 * settings drive NodejsFunction (`handlerBundling`) and the size test and benchmark
 * (`esbuildOptionsFor`), so what is measured is what is deployed.
 */
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import type { BuildOptions } from 'esbuild';
import { SOURCE_CONDITIONS } from './project.js';
import type { QueryDefinition } from '../lib/query/query-definition.js';

/** A deployed query's sink kind: a function is bundled for one (see handlerBundling). */
export type BundledSinkKind = QueryDefinition['sink']['kind'];

/**
 * The AWS SDK v3 (`@aws-sdk/*` and the `@smithy/*` packages it is built on) is left to the
 * nodejs22.x runtime, which ships it: bundled, every function measured 1.40 MB (bench/bundles.bench.ts,
 * BENCH_BUNDLE_SDK=bundled) against 0.79 MB without `@aws-sdk/*` and 0.62 MB without `@smithy/*`
 * either. `@smithy/node-http-handler`, which lib/aws/clients.ts gives the clients, is the runtime
 * SDK's own request handler; bundling it would load a second copy of `@smithy/core` at init.
 * CDK's own `@aws-cdk/aws-lambda-nodejs:sdkV3ExcludeSmithyPackages` flag makes the same choice.
 * Re-measured with the S3 SDK loaded on first use (README, bundles): bundled, even tree-shaken from
 * its ES modules, the functions are 1.41–1.53 MB for the same init CPU.
 */
export const AWS_SDK_EXTERNAL = ['@aws-sdk/*', '@smithy/*'];

/** The bundle's size bound per function (issue 17), checked by test/cdk/bundle-size.test.ts. */
export const MAX_BUNDLE_BYTES = 1_000_000;

/**
 * The source map is written beside the bundle (uploaded with it, never inlined) and Node reads it
 * only with `--enable-source-maps`, which the construct sets only under the `debugSourceMaps` prop:
 * mapping every stack trace costs init time and memory.
 *
 * With the query's sink kind, `SLUICE_BUNDLED_SINK` is defined as it (lib/aws/aws-backends.ts): the
 * other sinks' branches become dead code, and what only they use (Parquet, the upsert sink, the
 * compaction step) is left out of the bundle.
 */
export function handlerBundling(sinkKind?: BundledSinkKind): nodejs.BundlingOptions {
  return {
    ...(sinkKind ? { define: { SLUICE_BUNDLED_SINK: JSON.stringify(sinkKind) } } : {}),
    minify: true,
    sourceMap: true,
    sourceMapMode: nodejs.SourceMapMode.DEFAULT,
    sourcesContent: false,
    target: 'node22',
    format: nodejs.OutputFormat.CJS,
    bundleAwsSDK: false,
    externalModules: AWS_SDK_EXTERNAL,
    forceDockerBundling: false,
    logLevel: nodejs.LogLevel.ERROR,
    esbuildArgs: {
      ...LAZY_REQUIRE_ARGS,
      // From sluice's sources (its repository), `sluice/lambda` resolves to them as well.
      ...(SOURCE_CONDITIONS.length ? { '--conditions': SOURCE_CONDITIONS.join(',') } : {}),
    },
  };
}

/**
 * What a function loads only on first use (the S3 SDK where its sink is not S3: lib/aws/s3-sdk.ts)
 * it loads with `import()`. Kept as is, Node's ESM loader would load the SDK's CommonJS package:
 * about 95 ms of CPU for `@aws-sdk/client-s3` against 30 ms through `require`. Marked unsupported,
 * esbuild turns each `import()` into a `require` (still run at the first use).
 */
const LAZY_REQUIRE_ARGS = { '--supported:dynamic-import': 'false' };

/** The esbuild API options equivalent to `handlerBundling()` as NodejsFunction runs it. */
export function esbuildOptionsFor(entry: string, outfile: string, sinkKind?: BundledSinkKind): BuildOptions {
  const bundling = handlerBundling(sinkKind);
  return {
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: 'node',
    target: bundling.target,
    format: bundling.format === nodejs.OutputFormat.ESM ? 'esm' : 'cjs',
    minify: bundling.minify,
    sourcemap: bundling.sourceMap ? (bundling.sourceMapMode === nodejs.SourceMapMode.EXTERNAL ? 'external' : 'linked') : false,
    sourcesContent: bundling.sourcesContent,
    external: bundling.externalModules,
    conditions: SOURCE_CONDITIONS,
    ...(bundling.define ? { define: bundling.define } : {}),
    supported: { 'dynamic-import': false },
    logLevel: 'error',
  };
}
