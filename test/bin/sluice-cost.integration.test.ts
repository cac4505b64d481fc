/**
 * `sluice cost` against a measured run: the same query and the same kind of records run through the
 * real Kinesis-trigger handler on the emulators (batches of 25 records per shard, as the estimate
 * assumes at 25 records/s per shard); the DynamoDB units the adapters counted per invocation must
 * be within 25% of the estimate's per-batch figures, component by component where they can be told
 * apart (writes, reads), and the CLI must print the same estimate.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { estimateMonthlyCost, syntheticRecords } from '../../lib/aws/cost-estimate.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { hourlySalesQuery } from '../../lib/local/dev/default-query.js';
import { deploy } from '../support/aws-pipeline.js';
import { runSluice } from '../support/sluice-cli.js';

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

const SHARDS = 2;
const BATCH = 25;
const KEYS = 10;

describe('sluice cost', () => {
  it('estimates per-batch DynamoDB units within 25% of a measured run through the real handlers', async () => {
    const definition = hourlySalesQuery('update', 'cost-check');
    const estimate = await estimateMonthlyCost(definition, { recordsPerSecond: BATCH * SHARDS, shards: SHARDS, keys: KEYS, batchSize: BATCH });
    expect(estimate.perBatch.records).toBe(BATCH);

    const d = await deploy(emulators, definition, SHARDS);
    const records = syntheticRecords(definition, 400, { keys: KEYS, recordsPerSecond: BATCH * SHARDS, startMs: Date.now() - 600_000 });
    await d.put(records.map((r) => ({ data: Buffer.from(r.dataBase64, 'base64').toString(), partitionKey: r.partitionKey })));
    await d.drain({ batchSize: BATCH });
    const invocations = d.results.filter((r) => r.result.progress.some((p) => p.numInputRows > 0));
    const batches = d.results.flatMap((r) => r.result.progress).filter((p) => p.numInputRows > 0);
    expect(batches.reduce((n, p) => n + p.numInputRows, 0)).toBe(400);
    const measured = { write: 0, read: 0, rows: 0 };
    for (const r of d.results) {
      for (const p of r.result.progress) {
        measured.write += p.cost.dynamoDbWriteUnits ?? 0;
        measured.read += p.cost.dynamoDbReadUnits ?? 0;
        measured.rows += p.numInputRows;
      }
    }
    // Per record, since the mapping's batches are not all full (a shard's last one is partial).
    const perRecord = (units: number, records: number): number => units / records;
    const e = estimate.perBatch;
    const estimatedWrite = perRecord(e.checkpointWriteUnits + e.stateWriteUnits + e.sinkWriteUnits, e.records);
    const estimatedRead = perRecord(e.checkpointReadUnits, e.records);
    const measuredWrite = perRecord(measured.write, measured.rows);
    const measuredRead = perRecord(measured.read, measured.rows);
    const report = { estimatedWrite, measuredWrite, estimatedRead, measuredRead, invocations: invocations.length, batches: batches.length, perBatch: e };
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
