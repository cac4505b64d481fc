/**
 * `sluice cost` for a repartitioned query against a measured run: hourly sales with no partition
 * key on 2 shards needs a hop to a 2-shard internal stream. The real handlers run on the emulators;
 * what they sent is counted at the clients: the records stage 1 put on the internal stream (PUT
 * payload units), the invocations of the repartition function, and the DynamoDB write units per
 * table. Each, per source record, must be within 25% of the estimate's per-stage figures.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { syntheticRecords } from '../../lib/aws/cost-estimate.js';
import { estimateQueryCost } from '../../lib/aws/multi-source-cost.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { hourlySalesQuery } from '../../lib/local/dev/default-query.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { deploy } from '../support/aws-pipeline.js';
import { measureSteppedDrain, relativeError } from '../support/measured-run.js';

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

const SHARDS = 2;
const BATCH = 25;
// Partition keys k0…k49 hash 25 to each shard: every shard gets whole batches each second of the
// rate, the even spread the estimate assumes (k0…k9 split 6/4: three batches a second at 50/s).
const KEYS = 50;
// The estimate prices the steady state: the first seconds (two snapshot cycles of stage 2's state,
// snapshotEvery 3, before which no purges happen) are run but not counted; then two whole cycles are.
const WARMUP_SECONDS = 6;
const MEASURED_SECONDS = 6;

describe('sluice cost with a repartition stage', () => {
  // 50/s: one batch per shard a second, and stage 2 sees each store once per invocation. 500/s: ten
  // batches per shard, and each stage 2 invocation holds ten rows of each of its 25 stores, which
  // collapse into one sink write each (0.1 per record; the model that grouped every store in one
  // stage 2 invocation said 0.2).
  it.each([BATCH * SHARDS, 500])('at %i records/s: estimates the hop (PUT payload units, stage 2 invocations) and DynamoDB writes per stage within 25% of a measured run', async (perSecond) => {
    const countedRecords = MEASURED_SECONDS * perSecond;
    const base = hourlySalesQuery('update', 'cost-hop-check');
    // No partition key: the (hour, store) state is not co-partitioned with the stream, so one hop.
    const definition = defineQuery({ ...base, source: { ...base.source, partitionKey: undefined } });
    // What `sluice cost` prints for it.
    const estimate = await estimateQueryCost(definition, {
      sourceRates: { sales: perSecond }, shards: SHARDS, internalShards: SHARDS, keys: KEYS, batchSize: BATCH, snapshotEvery: 3,
    });
    expect(estimate.hops).toHaveLength(1);
    expect(estimate.lines.filter((l) => l.stage === 2).map((l) => l.component)).toContain('stage 2 Kinesis PUT payload units');

    const d = await deploy(emulators, definition, SHARDS, { repartitionShards: SHARDS, expectedShardCount: SHARDS });
    // Every record in one hour window (from the start of the previous hour): the state held and its
    // snapshot cycle then do not depend on when the test runs.
    const startMs = Math.floor((Date.now() - 3_600_000) / 3_600_000) * 3_600_000;
    const records = syntheticRecords(definition, (WARMUP_SECONDS + MEASURED_SECONDS) * perSecond, { keys: KEYS, recordsPerSecond: perSecond, startMs });
    const putSecond = (second: number) => d.put(records.slice(second * perSecond, (second + 1) * perSecond)
      .map((r) => ({ data: Buffer.from(r.dataBase64, 'base64').toString(), partitionKey: r.partitionKey })));
    // One second of the rate per round, each stage drained in order: every stage 2 invocation holds
    // what one second sent it, as the estimate models steady arrival. A burst drained with both
    // stages running would let the load decide how stage 1's batches group into stage 2's (rows of
    // one group collapse within an invocation: 0.795 sink writes per record once, 0.875 usually).
    // The internal mapping takes as many records per invocation as the estimate expects at this rate.
    const options = { batchSize: BATCH, internalBatchSize: estimate.hops[0]!.perBatch.records };
    const run = await measureSteppedDrain(d, { warmup: WARMUP_SECONDS, counted: MEASURED_SECONDS }, putSecond, options);
    const writes = run.writes;
    const hop = run.hops.get(d.config.repartitionStreamName!)!;
    const stage2Invocations = run.invocations.get(2) ?? 0;
    expect(run.sourceRows).toBe(countedRecords);

    // Estimated per source record: the month's quantities over the month's records.
    const monthRecords = estimate.recordsPerSecond * 730 * 3600;
    const per = (component: string): number => estimate.lines.find((l) => l.component === component)!.quantity / monthRecords;
    const ticks = 730 * 60;
    const perTicked = (component: string, tickUnits: number): number => (estimate.lines.find((l) => l.component === component)!.quantity - tickUnits) / monthRecords;
    const figures = {
      hopPayloadUnits: { estimated: per('stage 2 Kinesis PUT payload units'), measured: hop.payloadUnits / countedRecords },
      stage2Invocations: { estimated: estimate.hops[0]!.invocationsPerMonth / monthRecords, measured: stage2Invocations / countedRecords },
      stage2StateWrites: { estimated: per('stage 2 DynamoDB state writes'), measured: (writes.get(d.config.stateTable) ?? 0) / countedRecords },
      stage2SinkWrites: { estimated: per('stage 2 DynamoDB sink writes'), measured: (writes.get(d.config.sinkTable!) ?? 0) / countedRecords },
      checkpointWrites: {
        // Both stages' checkpoint rows share the checkpoint table; the ticks do not run here.
        estimated: perTicked('DynamoDB checkpoint writes', ticks * SHARDS) + perTicked('stage 2 DynamoDB checkpoint writes', ticks * SHARDS),
        measured: (writes.get(d.config.checkpointTable) ?? 0) / countedRecords,
      },
    };
    console.log(`sluice cost (hop) vs measured, per source record: ${JSON.stringify({ figures, hop, stage2Invocations, estimate: estimate.hops[0] })}`);
    for (const [name, f] of Object.entries(figures)) {
      expect(relativeError(f), `${name}: ${JSON.stringify(figures)}`).toBeLessThan(0.25);
    }
  }, 300_000);
});
