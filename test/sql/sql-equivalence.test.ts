/**
 * The same query written with the DataFrame API and with SQL text gives the same rows, batch by
 * batch, over several micro-batches of a MemoryStream (late rows, NULLs and an empty batch included).
 */
import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { stringifyWithLongs } from '../../lib/core/long.js';
import { approx_count_distinct, col, count, expr, lit, max, sum, when, window } from '../../lib/plan/functions.js';
import type { MemoryStream } from '../../lib/sources/memory-stream.js';

const SCHEMA = 'user string, amount long, ts timestamp';
const s = (sec: number): number => sec * 1_000_000;
const STEPS: unknown[][][] = [
  [['a', 10, s(1)], ['b', 250, s(2)], ['a', 120, s(299)], [null, 5, s(100)]],
  [],
  [['a', 300, s(310)], ['c', null, s(400)], ['b', 101, s(20)]],
  [['a', 1, s(1000)], ['b', 99, s(5)]],
];

type Build = (session: SluiceSession, events: DataFrame) => DataFrame;

/** Runs a query over STEPS; per step, the batches' rows in a canonical order. */
async function run(build: Build, mode: 'append' | 'update' | 'complete'): Promise<{ columns: string[]; steps: string[][] }> {
  const session = new SluiceSession({ 'spark.sql.shuffle.partitions': '2' });
  const { stream, df } = session.memoryStream(SCHEMA, 'events');
  const query = build(session, df);
  const batches: string[][] = [];
  const handle = await query.writeStream.outputMode(mode)
    .foreachBatch((batch) => { batches.push(batch.collect().map((r) => stringifyWithLongs(r)).sort()); })
    .checkpoint(new MemoryCheckpoint()).start();
  const steps: string[][] = [];
  try {
    for (const rows of STEPS) {
      const before = batches.length;
      (stream as MemoryStream).addData(rows);
      await handle.processAllAvailable();
      steps.push(batches.slice(before).map((b) => b.join(' ')));
    }
  } finally {
    await handle.stop();
  }
  return { columns: query.columns, steps };
}

async function expectSame(api: Build, sql: Build, mode: 'append' | 'update' | 'complete'): Promise<void> {
  const a = await run(api, mode);
  const b = await run(sql, mode);
  expect(b).toEqual(a);
  // Not vacuous: the query emitted rows.
  expect(a.steps.flat().join('')).not.toBe('');
}

describe('SQL text and the DataFrame API give the same rows', () => {
  it('selectExpr / filter strings / expr() in withColumn', async () => {
    await expectSame(
      (_, df) => df.filter(col('amount').gt(100).and(col('user').isNotNull()))
        .select(col('user'), col('amount').multiply(2).alias('x'), col('amount').cast('string').alias('s'))
        .withColumn('big', when(col('x').gt(500), 'yes').otherwise('no')),
      (_, df) => df.filter('amount > 100 AND user IS NOT NULL')
        .selectExpr('user', 'amount * 2 AS x', 'CAST(amount AS string) s')
        .withColumn('big', expr("CASE WHEN x > 500 THEN 'yes' ELSE 'no' END")),
      'append',
    );
  });

  it('where(string) keeps NULL rows out as Spark does (NULL is not true)', async () => {
    await expectSame(
      (_, df) => df.where(col('amount').between(5, 120).or(col('user').eq(lit('c')))),
      (_, df) => df.where("amount BETWEEN 5 AND 120 OR user = \"c\""),
      'append',
    );
  });

  it('session.sql: windowed count per user with a watermark, append mode', async () => {
    await expectSame(
      (_, df) => df.withWatermark('ts', '10 seconds')
        .groupBy(window(col('ts'), '5 minutes').alias('w'), col('user'))
        .agg(count().alias('n'), sum('amount').alias('total')),
      (session, df) => {
        df.withWatermark('ts', '10 seconds').createOrReplaceTempView('events');
        return session.sql(`SELECT window(ts, "5 minutes") AS w, user, count(*) AS n, sum(amount) AS total
          FROM events GROUP BY window(ts, "5 minutes"), user`);
      },
      'append',
    );
  });

  it('session.sql: WHERE, GROUP BY ordinal, HAVING on an alias, computed aggregates, update mode', async () => {
    await expectSame(
      (_, df) => df.filter(col('amount').isNotNull())
        .groupBy(col('user'))
        .agg(count().alias('n'), max('amount').alias('top'), approx_count_distinct('ts').alias('d'))
        .filter(col('n').gt(1))
        .select(col('user'), col('n'), col('top').minus(1).alias('top_minus_one'), col('d')),
      (session, df) => {
        df.createOrReplaceTempView('events');
        return session.sql(`SELECT user, count(*) AS n, max(amount) - 1 AS top_minus_one, approx_count_distinct(ts) AS d
          FROM events WHERE amount IS NOT NULL GROUP BY 1 HAVING n > 1`);
      },
      'update',
    );
  });

  it('session.sql: global aggregation in complete mode', async () => {
    await expectSame(
      (_, df) => df.agg(sum('amount').alias('total'), count('user').alias('users')),
      (session, df) => {
        df.createOrReplaceTempView('events');
        return session.sql('SELECT sum(amount) AS total, count(user) AS users FROM events');
      },
      'complete',
    );
  });

  it('session.sql: SELECT DISTINCT is an aggregation on every column, update mode', async () => {
    await expectSame(
      (_, df) => df.filter(col('user').isNotNull()).select(col('user')).groupBy(col('user')).agg(),
      (session, df) => {
        df.createOrReplaceTempView('events');
        return session.sql('SELECT DISTINCT user FROM events WHERE user IS NOT NULL');
      },
      'update',
    );
  });

  it('session.sql: a stream-stream inner join with a time range', async () => {
    await expectSame(
      (_, df) => {
        const left = df.withWatermark('ts', '1 minute').as('l');
        const right = df.withWatermark('ts', '1 minute').as('r');
        return left.join(right, col('l.user').eq(col('r.user')).and(col('r.ts').gt(col('l.ts'))), 'inner')
          .select(col('l.user').alias('user'), col('l.amount').alias('a'), col('r.amount').alias('b'));
      },
      (session, df) => {
        df.withWatermark('ts', '1 minute').createOrReplaceTempView('events');
        return session.sql('SELECT l.user AS user, l.amount AS a, r.amount AS b FROM events l JOIN events AS r ON l.user = r.user AND r.ts > l.ts');
      },
      'append',
    );
  });
});
