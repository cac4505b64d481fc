/**
 * `sluice cost` for a repartitioned query against a measured run: hourly sales with no partition
 * key on 2 shards needs a hop to a 2-shard internal stream. The real handlers run on the emulators;
 * what they sent is counted at the clients: the records stage 1 put on the internal stream (PUT
 * payload units), the invocations of the repartition function, and the DynamoDB write units per
 * table. Each, per source record, must be within 25% of the estimate's per-stage figures.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { estimateMonthlyCost, syntheticRecords } from '../../lib/aws/cost-estimate.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { hourlySalesQuery } from '../../lib/local/dev/default-query.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { deploy } from '../support/aws-pipeline.js';
import { measureDrain, relativeError } from '../support/measured-run.js';

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

const SHARDS = 2;
const BATCH = 25;
const KEYS = 10;
const RECORDS = 400;

describe('sluice cost with a repartition stage', () => {
  it('estimates the hop (PUT payload units, stage 2 invocations) and DynamoDB writes per stage within 25% of a measured run', async () => {
    const base = hourlySalesQuery('update', 'cost-hop-check');
    // No partition key: the (hour, store) state is not co-partitioned with the stream, so one hop.
    const definition = defineQuery({ ...base, source: { ...base.source, partitionKey: undefined } });
    const estimate = await estimateMonthlyCost(definition, {
      recordsPerSecond: BATCH * SHARDS, shards: SHARDS, internalShards: SHARDS, keys: KEYS, batchSize: BATCH, snapshotEvery: 3,
    });
    expect(estimate.hops).toHaveLength(1);
    expect(estimate.lines.filter((l) => l.stage === 2).map((l) => l.component)).toContain('stage 2 Kinesis PUT payload units');

    const d = await deploy(emulators, definition, SHARDS, { repartitionShards: SHARDS, expectedShardCount: SHARDS });
    const records = syntheticRecords(definition, RECORDS, { keys: KEYS, recordsPerSecond: BATCH * SHARDS, startMs: Date.now() - 600_000 });
    await d.put(records.map((r) => ({ data: Buffer.from(r.dataBase64, 'base64').toString(), partitionKey: r.partitionKey })));
    // The internal mapping takes as many records per invocation as the estimate expects at this
    // rate (the burst would otherwise put them all in one invocation).
    const run = await measureDrain(d, { batchSize: BATCH, internalBatchSize: estimate.hops[0]!.perBatch.records });
    const writes = run.writes;
    const hop = [...run.hops.values()][0]!;
    const stage2Invocations = run.invocations.get(2) ?? 0;
    expect(run.sourceRows).toBe(RECORDS);

    // Estimated per source record: the month's quantities over the month's records.
    const monthRecords = estimate.recordsPerSecond * 730 * 3600;
    const per = (component: string): number => estimate.lines.find((l) => l.component === component)!.quantity / monthRecords;
    const ticks = 730 * 60;
    const perTicked = (component: string, tickUnits: number): number => (estimate.lines.find((l) => l.component === component)!.quantity - tickUnits) / monthRecords;
    const figures = {
      hopPayloadUnits: { estimated: per('stage 2 Kinesis PUT payload units'), measured: hop.payloadUnits / RECORDS },
      stage2Invocations: { estimated: estimate.hops[0]!.invocationsPerMonth / monthRecords, measured: stage2Invocations / RECORDS },
      stage2StateWrites: { estimated: per('stage 2 DynamoDB state writes'), measured: (writes.get(d.config.stateTable) ?? 0) / RECORDS },
      stage2SinkWrites: { estimated: per('stage 2 DynamoDB sink writes'), measured: (writes.get(d.config.sinkTable!) ?? 0) / RECORDS },
      checkpointWrites: {
        // Both stages' checkpoint rows share the checkpoint table; the ticks do not run here.
        estimated: perTicked('DynamoDB checkpoint writes', ticks * SHARDS) + perTicked('stage 2 DynamoDB checkpoint writes', ticks * SHARDS),
        measured: (writes.get(d.config.checkpointTable) ?? 0) / RECORDS,
      },
    };
    console.log(`sluice cost (hop) vs measured, per source record: ${JSON.stringify({ figures, hop, stage2Invocations, estimate: estimate.hops[0] })}`);
    for (const [name, f] of Object.entries(figures)) {
      expect(relativeError(f), `${name}: ${JSON.stringify(figures)}`).toBeLessThan(0.25);
    }
  }, 300_000);
});
