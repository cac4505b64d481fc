/**
 * The testStream DSL (sluice/testing): a failed action names itself with a cursor in the action
 * list, shows the sink and the plan, and stops the query, as Spark's StreamTest does.
 */
import { describe, expect, it } from 'vitest';
import { SluiceSession, col, type StreamingQuery } from 'sluice';
import { addData, assertOnQuery, checkNewAnswer, testStream } from 'sluice/testing';

describe('testStream', () => {
  it('passes when every check holds', async () => {
    const { stream, df } = new SluiceSession().memoryStream('v long');
    await testStream(df.select(col('v')))(addData(stream, [1], [2]), checkNewAnswer([1], [2]), addData(stream, [3]), checkNewAnswer([3]));
  });

  it('on a failed check: the cursor, the sink, the plan; and the query is stopped', async () => {
    const { stream, df } = new SluiceSession().memoryStream('v long');
    let query: StreamingQuery | null = null;
    const run = testStream(df.select(col('v')))(
      addData(stream, [1]),
      assertOnQuery((q) => { query = q; }),
      checkNewAnswer([2]),
    );
    const error = await run.then(() => null, (e: unknown) => e as Error);
    expect(error).not.toBeNull();
    expect(error!.message).toMatch(/== Actions ==\n {3}StartStream\(\)\n {3}AddData.*\n {3}AssertOnQuery\n=> CheckNewAnswer/);
    expect(error!.message).toContain('== Sink ==\n[[1]]');
    expect(error!.message).toContain('== Plan ==');
    expect(query).not.toBeNull();
    expect(query!.isActive).toBe(false);
  });
});
