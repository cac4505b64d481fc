/**
 * `sluice cost` for a join of two streams (orders ⋈ payments) against a measured run of the real
 * handlers on the emulators: the records the estimate runs in memory (both streams at their rates,
 * 80% of the payments matching an order) are put on the two streams and drained. What the handlers
 * sent, counted at the clients (measured-run.ts), must be within 25% of the estimate scaled to the
 * run's records: the hop's PUT payload units, the join stage's invocations, the checkpoint writes,
 * the join's state writes (both sides buffered, then evicted) and its sink writes. The join keeps
 * rows for seconds (2 s watermarks, payments within 3 s), so the run reaches the steady state the
 * estimate prices. The same run's progress records carry each source's own rows and rates.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { interval } from '../../lib/plan/column.js';
import { col } from '../../lib/plan/functions.js';
import { defineQuery, type MultiSourceQueryDefinition } from '../../lib/query/query-definition.js';
import type { StreamingQueryProgress } from '../../lib/runtime/progress.js';
import { ORDERS_SCHEMA, PAYMENTS_SCHEMA } from '../support/join-queries.js';
import { relativeError } from '../support/measured-run.js';
import { measureMultiSourceCost } from '../support/multi-source-cost-run.js';
import { runSluice } from '../support/sluice-cli.js';

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

const SHARDS = 2;
const BATCH = 25;
const KEYS = 100;
// 25 records per shard and second: the burst the measured run drains makes the same batches as the rate.
const RATES = { orders: 50, payments: 50 };
const SECONDS = 12;
const MATCH_RATE = 0.8;

/** orders ⋈ payments within 3 s, 2 s watermarks: each side's rows are evicted seconds after they arrive. */
function shortJoin(name: string): MultiSourceQueryDefinition {
  return defineQuery({
    name, outputMode: 'append', sink: { kind: 'dynamodb', keyColumns: ['order_id'] },
    sources: { orders: { schema: ORDERS_SCHEMA }, payments: { schema: PAYMENTS_SCHEMA } },
    transform: ({ orders, payments }) => orders!.withWatermark('ts', '2 seconds')
      .join(payments!.filter(col('paid').gt(0)).withWatermark('pts', '2 seconds'),
        col('order_id').eq(col('ref')).and(col('pts').between(col('ts'), col('ts').plus(interval('3 seconds'))))),
  });
}

/** Rows per second of a source (or input) entry, recomputed from the record's own figures. */
function expectSourceRates(p: StreamingQueryProgress): void {
  for (const s of p.sources) {
    expect(s.processedRowsPerSecond).toBeCloseTo(s.numInputRows / (Math.max(1, p.batchDuration) / 1000), 6);
    if (p.inputRowsPerSecond !== undefined && p.numInputRows > 0) expect(s.inputRowsPerSecond).toBeCloseTo((p.inputRowsPerSecond * s.numInputRows) / p.numInputRows, 6);
  }
}

describe('sluice cost for a join of two streams', () => {
  it('estimates the hop, the join\'s state and sink writes and the checkpoint writes within 25% of a measured run; progress carries each source\'s rates', async () => {
    const definition = shortJoin('cost-join-check');
    const { estimate, d, run, input, runRecords, quantity, scale } = await measureMultiSourceCost(emulators, definition, {
      rates: RATES, shards: SHARDS, batchSize: BATCH, keys: KEYS, matchRate: MATCH_RATE, seconds: SECONDS,
    });
    expect(estimate.hops).toHaveLength(1);
    expect(estimate.notEstimated).toBeUndefined();
    expect(run.sourceRows).toBe(runRecords);

    // The month's quantities scaled to the run's records; the scheduled ticks do not run here.
    const ticks = 730 * 60;
    const hop = [...run.hops.values()][0]!;
    const figures = {
      hopPayloadUnits: { estimated: quantity('stage 2 Kinesis PUT payload units') * scale, measured: hop.payloadUnits },
      stage2Invocations: { estimated: quantity('stage 2 Lambda requests') * scale, measured: run.invocations.get(2) ?? 0 },
      checkpointWrites: {
        estimated: (quantity('orders: DynamoDB checkpoint writes') + quantity('payments: DynamoDB checkpoint writes')
          + quantity('stage 2 DynamoDB checkpoint writes') - 3 * ticks * SHARDS) * scale,
        measured: run.writes.get(d.config.checkpointTable) ?? 0,
      },
      stage2StateWrites: { estimated: quantity('stage 2 DynamoDB state writes') * scale, measured: run.writes.get(d.config.stateTable) ?? 0 },
      stage2SinkWrites: { estimated: quantity('stage 2 DynamoDB sink writes') * scale, measured: run.writes.get(d.config.sinkTable!) ?? 0 },
    };
    console.log(`sluice cost (two streams) vs measured, over the run's ${runRecords} records: ${JSON.stringify({ figures, hop, invocations: [...run.invocations], stages: estimate.stages })}`);
    for (const [name, f] of Object.entries(figures)) {
      expect(relativeError(f), `${name}: ${JSON.stringify(figures)}`).toBeLessThan(0.25);
    }

    // Progress: each source stage's records name their one stream, with its rows and rates; the
    // join stage's records carry each input's rows as they crossed the hop, each with its rates.
    const stage1 = d.results.filter((r) => !r.result.stage.inputHop);
    const stage2 = d.results.filter((r) => r.result.stage.inputHop).flatMap((r) => r.result.progress);
    for (const [source, records] of input) {
      const own = stage1.filter((r) => r.result.stage.sourceName === source).flatMap((r) => r.result.progress);
      expect(own.every((p) => p.sources.length === 1 && p.sources[0]!.numInputRows === p.numInputRows)).toBe(true);
      expect(own.every((p) => p.sources[0]!.processedRowsPerSecond === p.processedRowsPerSecond && p.sources[0]!.inputRowsPerSecond === p.inputRowsPerSecond)).toBe(true);
      expect(own.reduce((n, p) => n + p.sources[0]!.numInputRows, 0)).toBe(records.length);
      // What this source's stage 1 sent across the hop is what the join stage read as this input.
      const sent = own.reduce((n, p) => n + p.sink.numOutputRows, 0);
      const read = stage2.reduce((n, p) => n + p.sources.filter((s) => s.description.includes(source)).reduce((a, s) => a + s.numInputRows, 0), 0);
      expect(read, `${source}: ${JSON.stringify(stage2.find((p) => p.numInputRows > 0)?.sources)}`).toBe(sent);
      expect(sent).toBeGreaterThan(0.99 * records.length);
    }
    expect(stage2.every((p) => p.sources.length === 2 && p.sources.reduce((n, s) => n + s.numInputRows, 0) === p.numInputRows)).toBe(true);
    [...stage1.flatMap((r) => r.result.progress), ...stage2].forEach(expectSourceRates);

    // The CLI: a rate for every source, else a usage error naming the missing one.
    const missing = await runSluice(['cost', 'test/bin/fixtures/dev-join-join.ts', '--rate', 'orders=100/s,shipments=5/s'], 60_000);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/no rate for source 'payments' of query 'dev-join-join'/);
    const ok = await runSluice(['cost', 'test/bin/fixtures/dev-join-join.ts', '--rate', 'orders=100/s,payments=50/s,shipments=5/s', '--match-rate', '0.5'], 60_000);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/assumed: join: 50% of the rows of payments, shipments match a row of orders/);
    expect(ok.stdout).toMatch(/stage 3 DynamoDB state writes/);
    expect(ok.stdout).not.toMatch(/not estimated/);
  }, 300_000);
});
