/**
 * `sluice cost` for a query of three stages against a measured run: orders ⋈ payments, then a count
 * per 1-second window and amount (keys unrelated to the join's, so a second hop). Hop 2 carries the
 * join's batches and output, not stage 1's: the estimate runs every stage in memory, and each hop's
 * traffic and the invocations of the stage reading it must be within 25% of what the real handlers
 * put and ran on the emulators, as must the state writes (the join's and the count's), the S3 PUTs
 * of the count's files and the checkpoint writes.
 *
 * The run is stepped (one second of input per round, dealt to the shards as the estimate deals it,
 * each stage drained in order): with all the input put at once and the stages drained side by side, what
 * each internal-stream invocation found, and how the two senders' records interleaved on an
 * internal shard, followed the machine's scheduling, and so did how many of the count's batches
 * closed a window (S3 PUTs 240 measured quiet, 226 loaded, against 288 estimated).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { syntheticSourceRecords } from '../../lib/aws/cost-estimate.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { interval } from '../../lib/plan/column.js';
import { col, count, window } from '../../lib/plan/functions.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { defineQuery, type KinesisSourceSpec, type MultiSourceQueryDefinition } from '../../lib/query/query-definition.js';
import { ORDERS_SCHEMA, PAYMENTS_SCHEMA } from '../support/join-queries.js';
import { relativeError } from '../support/measured-run.js';
import { measureMultiSourceCost } from '../support/multi-source-cost-run.js';

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

const SHARDS = 2;
const BATCH = 25;
const KEYS = 100;
// 25 records per shard and second: the burst the measured run drains makes the same batches as the rate.
const RATES = { orders: 50, payments: 50 };
const SECONDS = 26;
/** Seconds run but not counted, as the estimate's own warm-up (a third of its 16 s). */
const WARMUP_SECONDS = 5;
/** Records per source far ahead in event time, matching nothing, put after the run's: they move every watermark past the run. */
const FLUSH = 20;
const MATCH_RATE = 0.8;

/** The join (within 1 s, 1 s watermarks), then paid orders per 1-second window and amount: three stages. */
function joinThenCountByAmount(name: string): MultiSourceQueryDefinition {
  return defineQuery({
    name, outputMode: 'append', sink: { kind: 's3-files' },
    sources: { orders: { schema: ORDERS_SCHEMA }, payments: { schema: PAYMENTS_SCHEMA } },
    transform: ({ orders, payments }) => orders!.withWatermark('ts', '1 second')
      .join(payments!.withWatermark('pts', '1 second'),
        col('order_id').eq(col('ref')).and(col('pts').between(col('ts'), col('ts').plus(interval('1 second')))))
      .groupBy(window(col('ts'), '1 second'), col('amount')).agg(count('*').as('orders')),
  });
}

describe('sluice cost for a query of three stages (join → count by other keys)', () => {
  it('estimates each hop\'s traffic and the invocations behind it, state, S3 and checkpoint writes within 25% of a measured run', async () => {
    const definition = joinThenCountByAmount('cost-chain-check');
    expect(compileQuery(definition, { allowRepartition: true }).hops).toHaveLength(2);
    // The windows close seconds of event time behind the input (watermarks, the join's bound, the
    // window): without the flush the run would end with its last windows open and their state
    // held, which the steady state the estimate prices has not.
    const flush = ({ name, spec }: { name: string; spec: KinesisSourceSpec }, startMs: number) => syntheticSourceRecords(spec, FLUSH, {
      keys: KEYS, recordsPerSecond: RATES[name as keyof typeof RATES], startMs: startMs + (SECONDS + 30) * 1000,
      columnValues: { [name === 'orders' ? 'order_id' : 'ref']: (i) => `flush-${i}` },
    });
    const { estimate, d, run, runRecords, quantity, scale } = await measureMultiSourceCost(emulators, definition, {
      rates: RATES, shards: SHARDS, batchSize: BATCH, keys: KEYS, matchRate: MATCH_RATE, seconds: SECONDS, hops: 2, extra: flush, stepped: { warmupSeconds: WARMUP_SECONDS },
    });
    expect(estimate.hops.map((h) => h.hop)).toEqual([1, 2]);
    expect(run.sourceRows).toBe(runRecords + 2 * FLUSH);

    const ticks = 730 * 60;
    const [hop1Stream, hop2Stream] = d.config.repartitionStreamNames!;
    const sum = (components: string[]): number => components.reduce((a, c) => a + quantity(c), 0);
    const figures = {
      hop1PayloadUnits: { estimated: quantity('stage 2 Kinesis PUT payload units') * scale, measured: run.hops.get(hop1Stream!)?.payloadUnits ?? 0 },
      hop2PayloadUnits: { estimated: quantity('stage 3 Kinesis PUT payload units') * scale, measured: run.hops.get(hop2Stream!)?.payloadUnits ?? 0 },
      stage2Invocations: { estimated: quantity('stage 2 Lambda requests') * scale, measured: run.invocations.get(2) ?? 0 },
      stage3Invocations: { estimated: quantity('stage 3 Lambda requests') * scale, measured: run.invocations.get(3) ?? 0 },
      stateWrites: {
        estimated: sum(['stage 2 DynamoDB state writes', 'stage 3 DynamoDB state writes']) * scale,
        measured: run.writes.get(d.config.stateTable) ?? 0,
      },
      s3Puts: { estimated: quantity('stage 3 S3 requests') * scale, measured: run.s3Puts },
      checkpointWrites: {
        estimated: (sum(['orders: DynamoDB checkpoint writes', 'payments: DynamoDB checkpoint writes', 'stage 2 DynamoDB checkpoint writes',
          'stage 3 DynamoDB checkpoint writes']) - 4 * ticks * SHARDS) * scale,
        measured: run.writes.get(d.config.checkpointTable) ?? 0,
      },
    };
    console.log(`sluice cost (three stages) vs measured, over the run's ${runRecords} records: ${JSON.stringify({ figures, invocations: [...run.invocations], batches: [...run.batches], hops: estimate.hops, stages: estimate.stages })}`);
    // Hop 2 is not stage 1's batch rate over again: it carries the join stage's batches.
    expect(estimate.hops[1]!.recordsPerSecond).toBeCloseTo(estimate.stages!.find((s) => s.stage === 2)!.batches * SHARDS, 6);
    for (const [name, f] of Object.entries(figures)) {
      expect(relativeError(f), `${name}: ${JSON.stringify(figures)}`).toBeLessThan(0.25);
    }
  }, 400_000);
});
