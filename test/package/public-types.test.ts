/**
 * The public types as a user's code sees them, imported by package name. `expectTypeOf` is
 * checked by the compiler (`npm run typecheck` covers test/), and the values are checked here.
 */
import type { App } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  DataFrame, SluiceSession, StreamingQuery, defineQuery, explainQuery, validateQuery,
  type OutputMode, type SinkSpec, type StreamingQueryDefinition, type QueryDefinition, type MultiSourceQueryDefinition, type ValidatedQuery,
} from 'sluice';
import { SluiceQuery, type SluiceQueryProps } from 'sluice/cdk';
import { createKinesisTriggerHandler, createScheduledTriggerHandler, type KinesisTriggerHandler, type ScheduledTriggerHandler } from 'sluice/lambda';
import { MemoryStream, testStream, type StreamAction } from 'sluice/testing';

describe('public types', () => {
  it('defineQuery takes and returns a StreamingQueryDefinition whose transform maps a DataFrame to a DataFrame', () => {
    // The one-stream overload (the last one, which Parameters/ReturnType see); the other takes `sources`.
    expectTypeOf<Parameters<typeof defineQuery>[0]>().toEqualTypeOf<StreamingQueryDefinition>();
    expectTypeOf<ReturnType<typeof defineQuery>>().toEqualTypeOf<StreamingQueryDefinition>();
    expectTypeOf<MultiSourceQueryDefinition['transform']>().parameters.toEqualTypeOf<[Readonly<Record<string, DataFrame>>, SluiceSession]>();
    expectTypeOf<StreamingQueryDefinition['transform']>().parameters.toEqualTypeOf<[DataFrame, SluiceSession]>();
    expectTypeOf<StreamingQueryDefinition['transform']>().returns.toEqualTypeOf<DataFrame>();
    expectTypeOf<StreamingQueryDefinition['outputMode']>().toEqualTypeOf<OutputMode>();
    expectTypeOf<OutputMode>().toEqualTypeOf<'append' | 'update' | 'complete'>();
    expectTypeOf<SinkSpec['kind']>().toEqualTypeOf<'s3-files' | 's3-snapshot' | 'dynamodb'>();
    expectTypeOf(validateQuery).returns.toEqualTypeOf<ValidatedQuery>();
    expectTypeOf(explainQuery).returns.toEqualTypeOf<string>();
  });

  it('the construct is a Construct taking (scope, id, SluiceQueryProps); queryModule is the one required prop', () => {
    expectTypeOf(SluiceQuery).toBeConstructibleWith({} as App, 'Query', { queryModule: './query.ts' });
    expectTypeOf<SluiceQuery>().toMatchTypeOf<Construct>();
    expectTypeOf<SluiceQueryProps['queryModule']>().toEqualTypeOf<string>();
    expectTypeOf<SluiceQueryProps['batchSize']>().toEqualTypeOf<number | undefined>();
    expectTypeOf<SluiceQueryProps['projectRoot']>().toEqualTypeOf<string | undefined>();
    expectTypeOf<SluiceQueryProps['depsLockFilePath']>().toEqualTypeOf<string | undefined>();
    expectTypeOf<SluiceQuery['definition']>().toEqualTypeOf<QueryDefinition>();
  });

  it('handler factories take a definition and give Lambda handlers; StreamingQuery is the runtime handle', () => {
    expectTypeOf<StreamingQueryDefinition>().toMatchTypeOf<Parameters<typeof createKinesisTriggerHandler>[0]>();
    expectTypeOf(createKinesisTriggerHandler).returns.toEqualTypeOf<KinesisTriggerHandler>();
    expectTypeOf(createScheduledTriggerHandler).returns.toEqualTypeOf<ScheduledTriggerHandler>();
    expectTypeOf<StreamingQuery['stop']>().toBeFunction();
    expectTypeOf(testStream).returns.toEqualTypeOf<(...actions: StreamAction[]) => Promise<void>>();
    expectTypeOf(MemoryStream).toBeConstructibleWith([], 'events');
  });

  it('the same values at run time', () => {
    expect(typeof defineQuery).toBe('function');
    expect(SluiceQuery.name).toBe('SluiceQuery');
    expect(StreamingQuery.name).toBe('StreamingQuery');
    expect(SluiceQuery).not.toBe(StreamingQuery);
  });
});
