/**
 * How the construct bundles each function (cdk/bundling.ts) and what it tells Node at start-up:
 * one generated entry per trigger kind importing only its factory, source maps external and not
 * read unless `debugSourceMaps` is set, the AWS SDK left to the runtime.
 */
import type { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import { describe, expect, it } from 'vitest';
import { AWS_SDK_EXTERNAL, esbuildOptionsFor, handlerBundling } from '../../cdk/bundling.js';
import { handlerEntrySource } from '../../cdk/generated-entry.js';
import { SluiceQuery, type SluiceQueryProps } from '../../cdk/sluice-query.js';
import { example, testStack } from './support.js';

type LambdaFunction = { Properties: { Handler: string; Runtime: string; Environment: { Variables: Record<string, unknown> } } };
const functionsOf = (stack: Stack): [string, LambdaFunction][] =>
  Object.entries(Template.fromStack(stack).findResources('AWS::Lambda::Function') as Record<string, LambdaFunction>);

function synth(props: Partial<SluiceQueryProps> = {}): Stack {
  const stack = testStack();
  new SluiceQuery(stack, 'PerProduct', { queryModule: example('hourly-sales-per-product.ts'), shardCount: 2, ...props });
  return stack;
}

describe('handler bundling', () => {
  it('minifies for node22 as CommonJS, with a linked external source map without sources', () => {
    const bundling = handlerBundling();
    expect(bundling).toMatchObject({
      minify: true, sourceMap: true, sourceMapMode: nodejs.SourceMapMode.DEFAULT, sourcesContent: false,
      target: 'node22', format: nodejs.OutputFormat.CJS,
    });
    expect(bundling.sourceMapMode).not.toBe(nodejs.SourceMapMode.INLINE);
    expect(bundling.sourceMapMode).not.toBe(nodejs.SourceMapMode.BOTH);
  });

  it('leaves the SDK (@aws-sdk/*, @smithy/*) external, as the nodejs22.x runtime ships it, and bundles everything else', () => {
    const bundling = handlerBundling();
    expect(bundling.bundleAwsSDK).toBe(false);
    expect(bundling.externalModules).toEqual(['@aws-sdk/*', '@smithy/*']);
    expect(bundling.nodeModules).toBeUndefined();
  });

  it('gives the benchmark and the size test the same esbuild options NodejsFunction runs', () => {
    const options = esbuildOptionsFor('/p/entry.mjs', '/p/out/index.js');
    expect(options).toMatchObject({
      bundle: true, platform: 'node', target: 'node22', format: 'cjs', minify: true,
      sourcemap: 'linked', sourcesContent: false, external: AWS_SDK_EXTERNAL,
    });
    // From the repository's sources (as here), `sluice` resolves to them in both.
    expect(options.conditions).toEqual(['sluice-source']);
    expect(handlerBundling().esbuildArgs).toEqual({ '--conditions': 'sluice-source', '--supported:dynamic-import': 'false' });
    // A module loaded on first use is loaded by `require` in both (not by Node's ESM loader).
    expect(options.supported).toEqual({ 'dynamic-import': false });
  });

  it('generates one entry per trigger kind, each importing only its own factory', () => {
    const factories = {
      kinesis: 'createKinesisTriggerHandler', scheduled: 'createScheduledTriggerHandler', repartition: 'createRepartitionTriggerHandler',
      'on-failure': 'createOnFailureHandler',
    };
    for (const [kind, factory] of Object.entries(factories)) {
      const source = handlerEntrySource(kind as keyof typeof factories, '/q/query.ts');
      expect(source).toContain(`import { ${factory} } from 'sluice/lambda';`);
      expect(source).toContain(`export const handler = ${factory}(query);`);
      for (const other of Object.values(factories).filter((f) => f !== factory)) expect(source).not.toContain(other);
    }
  });
});

describe('source maps at init', () => {
  it('are not read by default: no --enable-source-maps in any function\'s NODE_OPTIONS', () => {
    const functions = functionsOf(synth());
    // Kinesis trigger, scheduled, repartition and on-failure.
    expect(functions).toHaveLength(4);
    for (const [id, fn] of functions) {
      expect(fn.Properties.Runtime, id).toBe('nodejs22.x');
      expect(fn.Properties.Handler, id).toBe('index.handler');
      const options = fn.Properties.Environment.Variables.NODE_OPTIONS as string;
      expect(options, id).toMatch(/--max-semi-space-size=\d+/);
      expect(options, id).not.toContain('--enable-source-maps');
    }
  });

  it('are read with debugSourceMaps', () => {
    const functions = functionsOf(synth({ debugSourceMaps: true }));
    expect(functions).toHaveLength(4);
    for (const [id, fn] of functions) {
      expect(fn.Properties.Environment.Variables.NODE_OPTIONS, id).toMatch(/^--enable-source-maps --max-semi-space-size=\d+$/);
    }
  });
});
