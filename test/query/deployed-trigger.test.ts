import { describe, expect, it } from 'vitest';
import { deployedTrigger, MAX_BATCHING_WINDOW_SECONDS } from '../../lib/query/deployed-trigger.js';
import { defineQuery, type StreamingQueryDefinition } from '../../lib/query/query-definition.js';
import { explainQuery } from '../../lib/query/validate-query.js';
import { Trigger } from '../../lib/runtime/trigger.js';
import { col, count } from '../../lib/plan/functions.js';

const query = (trigger?: StreamingQueryDefinition['trigger']): StreamingQueryDefinition => ({
  name: 'by-type', source: { schema: 'event_type string' }, outputMode: 'update', sink: { kind: 'dynamodb' },
  transform: (df) => df.groupBy(col('event_type')).agg(count('*').as('n')), ...(trigger ? { trigger } : {}),
});

describe('Spark triggers on Lambda', () => {
  it('processingTime maps to the source mapping\'s batching window, up to 300 s', () => {
    expect(deployedTrigger(Trigger.ProcessingTime('1 minute'))).toMatchObject({ batchingWindowSeconds: 60, drain: false });
    expect(deployedTrigger(Trigger.ProcessingTime('5 minutes')).batchingWindowSeconds).toBe(MAX_BATCHING_WINDOW_SECONDS);
    expect(deployedTrigger(Trigger.ProcessingTime(1500)).batchingWindowSeconds).toBe(2);
    expect(deployedTrigger(undefined)).toMatchObject({ batchingWindowSeconds: null, drain: false });
  });

  it('a longer interval is refused when the query is defined, saying why and what to use', () => {
    expect(() => defineQuery(query(Trigger.ProcessingTime('10 minutes')))).toThrow(/at most 300 seconds \(MaximumBatchingWindowInSeconds\)/);
    try {
      defineQuery(query(Trigger.ProcessingTime('10 minutes')));
    } catch (error) {
      expect((error as { code?: string }).code).toBe('INVALID_TRIGGER');
      expect((error as { hint?: string }).hint).toMatch(/availableNow with the construct's scheduleRate/);
    }
  });

  it('availableNow (and once) is the scheduled drain; explain says what each trigger means on Lambda', () => {
    expect(deployedTrigger(Trigger.AvailableNow())).toMatchObject({ batchingWindowSeconds: null, drain: true });
    expect(deployedTrigger(Trigger.Once()).drain).toBe(true);
    expect(explainQuery(query(Trigger.ProcessingTime('1 minute')), { expectedShardCount: 1 })).toMatch(/== Trigger ==\nprocessingTime\(60 s\): each shard's mapping gathers records for up to 60 s/);
    expect(explainQuery(query(Trigger.AvailableNow()), { expectedShardCount: 1 })).toMatch(/availableNow: .*drains every shard to its end/);
    expect(explainQuery(query(), { expectedShardCount: 1 })).toMatch(/== Trigger ==\ndefault/);
  });
});
