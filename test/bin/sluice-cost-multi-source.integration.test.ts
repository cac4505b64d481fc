/**
 * `sluice cost` for a query over two streams (orders ⋈ payments) against a measured run of the real
 * handlers on the emulators: the records the source stages put on the internal stream (PUT payload
 * units), the invocations of the stage reading it, and the checkpoint table's write units. Each,
 * over the run's records, must be within 25% of the estimate's. The join's state and sink writes
 * are not estimated (the estimate says so); the CLI refuses a missing source rate with exit 2.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { KinesisClient } from '@aws-sdk/client-kinesis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { estimateMultiSourceCost } from '../../lib/aws/cost-estimate.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { deploy } from '../support/aws-pipeline.js';
import { joinEvents, joinQuery } from '../support/join-queries.js';
import { runSluice } from '../support/sluice-cli.js';
import { countHopRecords, writeUnitsByTable } from './request-units.js';

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

const SHARDS = 2;
const BATCH = 25;

describe('sluice cost for a query over two streams', () => {
  it('estimates the source stages\' checkpoint writes and the hop within 25% of a measured run', async () => {
    const definition = joinQuery('cost-join-check', 'inner');
    const events = joinEvents(200, 7);
    // The rates that make the run's batches: full ones on each shard of orders, payments in proportion.
    const orderRate = BATCH * SHARDS;
    const paymentRate = orderRate * (events.payments.length / events.orders.length);
    const estimate = await estimateMultiSourceCost(definition, {
      sourceRates: { orders: orderRate, payments: paymentRate }, shards: SHARDS, internalShards: SHARDS, batchSize: BATCH, snapshotEvery: 3,
    });
    expect(estimate.hops).toHaveLength(1);
    expect(estimate.notEstimated).toEqual(expect.arrayContaining([expect.stringMatching(/stage 2 state writes/)]));

    const d = await deploy(emulators, definition, SHARDS, { repartitionShards: SHARDS, expectedShardCount: undefined });
    await d.put(events.orders.map((o) => ({ data: JSON.stringify(o), partitionKey: o.order_id })), 'orders');
    await d.put(events.payments.map((p) => ({ data: JSON.stringify(p), partitionKey: p.ref })), 'payments');
    const writes = new Map<string, number>();
    const hop = { records: 0, payloadUnits: 0 };
    const dynamoSend = DynamoDBClient.prototype.send;
    const kinesisSend = KinesisClient.prototype.send;
    DynamoDBClient.prototype.send = async function (this: DynamoDBClient, ...args: Parameters<typeof dynamoSend>) {
      for (const [table, units] of writeUnitsByTable(args[0] as never)) writes.set(table, (writes.get(table) ?? 0) + units);
      const c = args[0] as any; const items = c.input.TransactItems ?? [c.input];
      return (dynamoSend as (...a: unknown[]) => Promise<unknown>).apply(this, args);
    } as typeof dynamoSend;
    KinesisClient.prototype.send = async function (this: KinesisClient, ...args: Parameters<typeof kinesisSend>) {
      countHopRecords(args[0] as never, hop);
      return (kinesisSend as (...a: unknown[]) => Promise<unknown>).apply(this, args);
    } as typeof kinesisSend;
    try {
      await d.drain({ batchSize: BATCH, internalBatchSize: estimate.hops[0]!.perBatch.records });
    } finally {
      DynamoDBClient.prototype.send = dynamoSend;
      KinesisClient.prototype.send = kinesisSend;
    }
    const sourceRows = d.results.filter((r) => !r.result.stage.inputHop).flatMap((r) => r.result.progress).reduce((n, p) => n + p.numInputRows, 0);
    const runRecords = events.orders.length + events.payments.length;
    expect(sourceRows).toBe(runRecords);
    const stage2Invocations = d.results.filter((r) => r.result.stage.inputHop && r.result.progress.some((p) => p.numInputRows > 0)).length;

    // The month's quantities scaled to the run's records; the scheduled ticks do not run here.
    const scale = runRecords / (estimate.recordsPerSecond * 730 * 3600);
    const ticks = 730 * 60;
    const quantity = (component: string): number => estimate.lines.find((l) => l.component === component)!.quantity;
    const figures = {
      hopPayloadUnits: { estimated: quantity('stage 2 Kinesis PUT payload units') * scale, measured: hop.payloadUnits },
      stage2Invocations: { estimated: quantity('stage 2 Lambda requests') * scale, measured: stage2Invocations },
      checkpointWrites: {
        estimated: (quantity('orders: DynamoDB checkpoint writes') + quantity('payments: DynamoDB checkpoint writes')
          + quantity('stage 2 DynamoDB checkpoint writes') - 3 * ticks * SHARDS) * scale,
        measured: writes.get(d.config.checkpointTable) ?? 0,
      },
    };
    console.log(`sluice cost (two streams) vs measured, over the run's ${runRecords} records: ${JSON.stringify({ figures, hop, state: writes.get(d.config.stateTable) ?? 0 })}`);
    for (const [name, f] of Object.entries(figures)) {
      expect(Math.abs(f.estimated - f.measured) / f.measured, `${name}: ${JSON.stringify(figures)}`).toBeLessThan(0.25);
    }

    // The CLI: a rate for every source, else a usage error naming the missing one.
    const missing = await runSluice(['cost', 'test/bin/fixtures/dev-join-join.ts', '--rate', 'orders=100/s,shipments=5/s'], 60_000);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/no rate for source 'payments' of query 'dev-join-join'/);
    const ok = await runSluice(['cost', 'test/bin/fixtures/dev-join-join.ts', '--rate', 'orders=100/s,payments=50/s,shipments=5/s', '--json'], 60_000);
    expect(ok.code, ok.stderr).toBe(0);
    const printed = JSON.parse(ok.stdout) as typeof estimate;
    expect(printed.hops).toHaveLength(2);
    expect(new Set(printed.lines.map((l) => l.stage))).toEqual(new Set([1, 2, 3]));
  }, 300_000);
});
