import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import { isStatefulOperator } from '../../lib/analysis/stateful-operators.js';
import { col, count } from '../../lib/plan/functions.js';

const session = new SluiceSession();
const stream = () => session.memoryStream('a int, b int').df;
const batch = () => session.createDataFrame([], 'a int, b int');

describe('isStatefulOperator', () => {
  it('is a streaming aggregation, a streaming deduplication or a join of two streams', () => {
    expect(isStatefulOperator(stream().groupBy('a').agg(count().as('n')).plan)).toBe(true);
    expect(isStatefulOperator(stream().dropDuplicates(['a']).plan)).toBe(true);
    expect(isStatefulOperator(stream().as('L').join(stream().as('R'), col('L.a').eq(col('R.a'))).plan)).toBe(true);
  });

  it('is not the same operator over static data, a stream-static join, or a stateless node', () => {
    expect(isStatefulOperator(batch().groupBy('a').agg(count().as('n')).plan)).toBe(false);
    expect(isStatefulOperator(batch().dropDuplicates(['a']).plan)).toBe(false);
    expect(isStatefulOperator(stream().as('L').join(batch().as('R'), col('L.a').eq(col('R.a'))).plan)).toBe(false);
    expect(isStatefulOperator(stream().filter(col('a').gt(1)).plan)).toBe(false);
  });
});
