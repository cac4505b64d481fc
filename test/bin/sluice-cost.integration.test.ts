/**
 * `sluice cost` against a measured run: the same query and the same kind of records run through the
 * real Kinesis-trigger handler on the emulators (batches of 25 records per shard, as the estimate
 * assumes at 25 records/s per shard); the DynamoDB write and read units of the requests the
 * handlers sent, per record, must be within 25% of the estimate's, and the CLI must print the same
 * estimate.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { estimateMonthlyCost, syntheticRecords } from '../../lib/aws/cost-estimate.js';
import { itemSize, readUnitsFor, writeUnitsFor, type Item } from '../../lib/aws/dynamodb-cost.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { hourlySalesQuery } from '../../lib/local/dev/default-query.js';
import { deploy } from '../support/aws-pipeline.js';
import { runSluice } from '../support/sluice-cli.js';

/** A request's units by AWS's rules, from what it wrote and what it read back. */
function unitsOf(command: { constructor: { name: string }; input: Record<string, any> }, out: Record<string, any>): { write: number; read: number } {
  const i = command.input;
  switch (command.constructor.name) {
    case 'PutItemCommand': return { write: writeUnitsFor(itemSize(i.Item)), read: 0 };
    case 'UpdateItemCommand': return { write: 1, read: 0 };
    case 'BatchWriteItemCommand': return { write: (Object.values(i.RequestItems)[0] as unknown[]).length, read: 0 };
    case 'TransactWriteItemsCommand':
      return { write: (i.TransactItems as { Put?: { Item: Item } }[]).reduce((a, t) => a + (t.Put ? writeUnitsFor(itemSize(t.Put.Item), true) : 2), 0), read: 0 };
    case 'GetItemCommand': return { write: 0, read: readUnitsFor(out.Item ? itemSize(out.Item) : 0, i.ConsistentRead === true) };
    case 'QueryCommand': return { write: 0, read: readUnitsFor((out.Items as Item[] ?? []).reduce((a, it) => a + itemSize(it), 0), i.ConsistentRead === true) };
    default: return { write: 0, read: 0 };
  }
}

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

const SHARDS = 2;
const BATCH = 25;
const KEYS = 10;

describe('sluice cost', () => {
  it('estimates per-batch DynamoDB units within 25% of a measured run through the real handlers', async () => {
    const definition = hourlySalesQuery('update', 'cost-check');
    // deploy() snapshots state every 3 versions.
    const estimate = await estimateMonthlyCost(definition, { recordsPerSecond: BATCH * SHARDS, shards: SHARDS, keys: KEYS, batchSize: BATCH, snapshotEvery: 3 });
    expect(estimate.perBatch.records).toBe(BATCH);

    const d = await deploy(emulators, definition, SHARDS);
    const records = syntheticRecords(definition, 400, { keys: KEYS, recordsPerSecond: BATCH * SHARDS, startMs: Date.now() - 600_000 });
    await d.put(records.map((r) => ({ data: Buffer.from(r.dataBase64, 'base64').toString(), partitionKey: r.partitionKey })));
    // Measured at the client: every request the handlers sent, priced by AWS's rules on the items
    // actually written and read (dynamodb-cost.ts). Not the progress records' cost: two shards run
    // concurrently in this process on one cost meter, so each batch's cost there also holds some
    // of the other shard's requests. DynamoDB Local's own ConsumedCapacity is kept for the log.
    const measured = { write: 0, read: 0, localReported: 0 };
    const send = DynamoDBClient.prototype.send;
    DynamoDBClient.prototype.send = async function (this: DynamoDBClient, ...args: Parameters<typeof send>) {
      const out = await (send as (...a: unknown[]) => Promise<Record<string, unknown>>).apply(this, args);
      const units = unitsOf(args[0] as never, out);
      measured.write += units.write;
      measured.read += units.read;
      measured.localReported += ([] as { CapacityUnits?: number }[]).concat((out?.ConsumedCapacity ?? []) as never).reduce((a, c) => a + (c?.CapacityUnits ?? 0), 0);
      return out;
    } as typeof send;
    try {
      await d.drain({ batchSize: BATCH });
    } finally {
      DynamoDBClient.prototype.send = send;
    }
    const invocations = d.results.filter((r) => r.result.progress.some((p) => p.numInputRows > 0));
    const batches = d.results.flatMap((r) => r.result.progress).filter((p) => p.numInputRows > 0);
    expect(batches.reduce((n, p) => n + p.numInputRows, 0)).toBe(400);
    const rows = batches.reduce((n, p) => n + p.numInputRows, 0);
    // Per record, since the mapping's batches are not all full (a shard's last one is partial).
    const perRecord = (units: number, records: number): number => units / records;
    const e = estimate.perBatch;
    const estimatedWrite = perRecord(e.checkpointWriteUnits + e.stateWriteUnits + e.sinkWriteUnits, e.records);
    const estimatedRead = perRecord(e.checkpointReadUnits, e.records);
    const measuredWrite = perRecord(measured.write, rows);
    const measuredRead = perRecord(measured.read, rows);
    const report = {
      estimatedWrite, measuredWrite, estimatedRead, measuredRead, localReportedReadAndWrite: measured.localReported / rows,
      invocations: invocations.length, batches: d.results.flatMap((r) => r.result.progress).length, perInvocation: e,
    };
    console.log(`sluice cost vs measured: ${JSON.stringify(report)}`);
    expect(Math.abs(estimatedWrite - measuredWrite) / measuredWrite, JSON.stringify(report)).toBeLessThan(0.25);
    expect(Math.abs(estimatedRead - measuredRead) / measuredRead, JSON.stringify(report)).toBeLessThan(0.25);

    // The CLI prints the same estimate, by component, and refuses a bad rate with exit code 2.
    const cli = await runSluice(['cost', 'lib/local/dev/default-query.ts', '--rate', `${BATCH * SHARDS}/s`, '--shards', String(SHARDS),
      '--keys', String(KEYS), '--batch-size', String(BATCH), '--json'], 60_000);
    expect(cli.code, cli.stderr).toBe(0);
    const printed = JSON.parse(cli.stdout) as typeof estimate;
    expect(printed.lines.map((l) => l.component)).toEqual(estimate.lines.map((l) => l.component));
    expect(printed.perBatch.sinkWriteUnits).toBe(estimate.perBatch.sinkWriteUnits);
    const bad = await runSluice(['cost', 'lib/local/dev/default-query.ts', '--rate', 'fast'], 60_000);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--rate must be records per second/);
  }, 300_000);
});
