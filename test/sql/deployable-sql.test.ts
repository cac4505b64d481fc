/** A deployable query's transform may be SQL: it registers the stream as a view and runs session.sql. */
import { describe, expect, it } from 'vitest';
import { defineQuery } from '../../lib/query/query-definition.js';
import { validateQuery } from '../../lib/query/validate-query.js';
import { col, count, window } from '../../lib/plan/functions.js';

const SCHEMA = 'user string, amount long, ts timestamp';

describe('SQL in a deployable query', () => {
  it('validates to the same plan shape and output as the DataFrame API', () => {
    const viaSql = validateQuery(defineQuery({
      name: 'sql-counts', source: { schema: SCHEMA }, outputMode: 'append', sink: { kind: 'dynamodb' },
      transform: (events, session) => {
        events.withWatermark('ts', '1 minute').createOrReplaceTempView('events');
        return session.sql("SELECT window(ts, '5 minutes') AS w, user, count(*) AS n FROM events WHERE amount > 0 GROUP BY 1, 2");
      },
    }), { expectedShardCount: 1 });
    const viaApi = validateQuery(defineQuery({
      name: 'api-counts', source: { schema: SCHEMA }, outputMode: 'append', sink: { kind: 'dynamodb' },
      transform: (events) => events.withWatermark('ts', '1 minute').filter(col('amount').gt(0))
        .groupBy(window(col('ts'), '5 minutes').alias('w'), col('user')).agg(count().alias('n')),
    }), { expectedShardCount: 1 });
    expect(viaSql.columns).toEqual(['w', 'user', 'n']);
    expect(viaSql.schema).toEqual(viaApi.schema);
    expect(viaSql.isStateful).toBe(true);
    expect(viaSql.keyColumns).toEqual(viaApi.keyColumns);
  });

  it('an update-mode DynamoDB sink finds its key columns through HAVING and computed columns', () => {
    const validated = validateQuery(defineQuery({
      name: 'sql-update', source: { schema: SCHEMA }, outputMode: 'update', sink: { kind: 'dynamodb' },
      transform: (events, session) => {
        events.createOrReplaceTempView('events');
        return session.sql('SELECT upper(user) AS who, count(*) AS n, max(amount) - 1 AS top FROM events GROUP BY upper(user) HAVING n > 1');
      },
    }), { expectedShardCount: 1 });
    expect(validated.columns).toEqual(['who', 'n', 'top']);
    expect(validated.keyColumns).toEqual(['who']);
  });

  it('refuses an append-mode aggregation without a watermark, as the DataFrame API does', () => {
    expect(() => validateQuery(defineQuery({
      name: 'sql-no-watermark', source: { schema: SCHEMA }, outputMode: 'append', sink: { kind: 'dynamodb' },
      transform: (events, session) => {
        events.createOrReplaceTempView('events');
        return session.sql('SELECT user, count(*) AS n FROM events GROUP BY user');
      },
    }), { expectedShardCount: 1 })).toThrow(/Append output mode not supported when there are streaming aggregations/);
  });
});
