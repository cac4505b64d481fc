/**
 * The chaos harness's queries of several stages and their in-memory references: the chain and the
 * join run through hops on several shards, the join's reference decodes dead letters as a source
 * stage does, and the payments join the sales they were drawn from.
 */
import { describe, expect, it } from 'vitest';
import { compileQuery } from '../../../lib/query/compiled-query.js';
import { chainedAggregatesQuery, generatePayments, joinThenAggregateQuery, withSaleIds } from '../../../lib/local/chaos/staged-queries.js';
import { runInMemory, runMultiSourceInMemory, type PlacedRecord } from '../../../lib/local/chaos/memory-reference.js';
import { generateSalesEvents } from '../../../lib/local/sample-events.js';

const sales = withSaleIds(generateSalesEvents({ seed: 4, stores: ['north', 'south', 'east'], hours: 3, eventsPerStoreHour: 6, lateRows: 2, malformed: 2 }));
const payments = generatePayments(sales, 4);
const placed = (records: readonly { data: string; partitionKey: string }[]): PlacedRecord[] =>
  records.map((r, i) => ({ shardId: 'memory', sequenceNumber: String(i), partitionKey: r.partitionKey, data: r.data }));

describe('the chaos harness\'s queries of several stages', () => {
  it('on 2 shards: the chain has two hops after its source stage, the join one source stage per stream and two hops', () => {
    const chain = compileQuery(chainedAggregatesQuery(), { expectedShardCount: 2, allowRepartition: true });
    const join = compileQuery(joinThenAggregateQuery(), { expectedShardCount: 2, allowRepartition: true });
    expect(chain.hops).toHaveLength(2);
    expect(join.hops).toHaveLength(2);
    expect(join.stages.filter((s) => s.reads === 'source-stream').map((s) => s.sourceName).sort()).toEqual(['payments', 'sales']);
  });

  it('every sale has its own id, and payments refer to sales of wave 1 (and a few to none)', () => {
    const ids = sales.filter((r) => r.kind !== 'malformed').map((r) => (JSON.parse(r.data) as { id: string }).id);
    expect(new Set(ids).size).toBe(ids.length);
    const refs = payments.map((p) => (JSON.parse(p.data) as { ref: string }).ref);
    const wave1 = new Set(sales.filter((r) => r.wave === 1 && r.kind === 'event').map((r) => (JSON.parse(r.data) as { id: string }).id));
    expect(refs.filter((r) => wave1.has(r)).length).toBeGreaterThan(refs.length / 2);
    expect(refs.some((r) => r.startsWith('unknown-'))).toBe(true);
  });

  it('the references: the chain sums every on-time sale once; the join counts paid sales; dead letters as the source decodes them', async () => {
    const wave1 = placed(sales.filter((r) => r.wave === 1));
    const chain = await runInMemory(chainedAggregatesQuery(), [...wave1, ...placed(sales.filter((r) => r.wave === 2))], { batchSize: 10 });
    const onTime = sales.filter((r) => r.kind === 'event' && r.wave === 1).map((r) => JSON.parse(r.data) as { amount: number; ts: string });
    const firstHours = onTime.filter((s) => Date.parse(s.ts) < Date.parse('2024-05-01T14:00:00Z'));
    // The first two hours are closed by the watermark: every sale of them counted once.
    const closed = chain.rows.filter((r) => Date.parse((r.window as { start: string }).start) < Date.parse('2024-05-01T14:00:00Z'));
    expect(closed.reduce((n, r) => n + Number(r.orders), 0)).toBe(firstHours.length);
    expect(closed.reduce((n, r) => n + Number(r.sales), 0)).toBe(firstHours.reduce((n, s) => n + s.amount, 0));

    const join = await runMultiSourceInMemory(joinThenAggregateQuery(), [{ sales: wave1, payments: placed(payments) }]);
    expect(join.rows.length).toBeGreaterThan(0);
    expect(join.rows.reduce((n, r) => n + Number(r.paid_sales), 0)).toBeLessThanOrEqual(payments.length);
    // Both malformed sales: bad JSON, and a string amount (a column the join does not read, which a source stage still decodes).
    expect(join.deadLetters.map((d) => d.reason.split(':')[0]).sort()).toEqual(['field \'amount\' should be double but is a string', 'malformed JSON']);
  });
});
