/**
 * Issue 11 on the emulators, through stage 2's handler (the function reading the internal
 * repartition stream): a long sum merging stage 1's partial aggregates past int64 raises
 * ARITHMETIC_OVERFLOW inside stage 2's aggregate. Stage 2's source cannot hold a source record
 * back, so the batch used to fail on every retry and the internal stream's shard was blocked until
 * the mapping gave the batch up (its partials lost). Now the partials whose merge raises are
 * found by the same resumable search, dead-lettered with their provenance (source partition and
 * stage-1 batch), and everything else commits: the sink equals the in-memory answer over the source
 * records minus those the dead-lettered partials stand for, and later batches keep merging.
 *
 * Each step below is one stage-1 batch (the source mapping is drained after each put), so each
 * partial stands for a known set of source records.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineQuery } from '../../lib/query/query-definition.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { readDeadLetters } from '../../lib/aws/s3-dead-letter-writer.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { createKinesisTriggerHandler, createRepartitionTriggerHandler } from '../../lib/aws/kinesis-trigger-handler.js';
import { createQuietObservability } from '../../lib/aws/observability.js';
import { LocalEventSourceMapping } from '../../lib/local/event-source-mapping.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { col, count, sum } from '../../lib/plan/functions.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import type { ShardInvocationResult } from '../../lib/query/shard-invocation.js';
import { decodeRepartitionRecord } from '../../lib/sources/repartition-records.js';
import { redriveDeadLetters } from '../../lib/aws/dead-letter-redrive.js';
import { reprocessDeadLetters } from '../../lib/aws/dead-letter-reprocess.js';
import { deploy, type Deployment } from '../support/aws-pipeline.js';
import { answerInMemory } from '../support/data-error-runs.js';

const SCHEMA = 'k string, amount long';
const totals = (df: DataFrame): DataFrame => df.groupBy(col('k')).agg(sum(col('amount')).as('total'), count('*').as('n'));
// No partition key: the grouping needs the repartition stage, stage 1 sends partial sums.
const definition = defineQuery({
  name: 'stage2-overflows', source: { schema: SCHEMA }, transform: totals, outputMode: 'update', sink: { kind: 'dynamodb', keyColumns: ['k'] },
});

interface Event { k: string; amount: bigint }
const B = 2n ** 62n;
const e = (k: string, amount: bigint): Event => ({ k, amount });
const json = (ev: Event): string => `{"k":"${ev.k}","amount":${ev.amount}}`;

const answerOver = async (events: readonly Event[]): Promise<string[]> => canonical(await answerInMemory(SCHEMA, totals, events.map((ev) => [ev.k, ev.amount])));
const canonical = (rows: Record<string, unknown>[]): string[] => rows.map((r) => JSON.stringify([r.k, String(r.total), Number(r.n)])).sort();

/** The source's mapping and stage 2's, as the construct deploys them, driven step by step. */
function pipeline(d: Deployment, emulators: EmulatorSet) {
  const results: ShardInvocationResult[] = [];
  const options = {
    config: d.config, clientOptions: emulators.clientOptions, observability: createQuietObservability(definition.name),
    onInvocation: (_shardId: string, result: ShardInvocationResult) => { results.push(result); },
  };
  const common = { kinesis: d.clients.kinesis, batchSize: 1000, maximumRetryAttempts: 2, bisectBatchOnFunctionError: true, pollIntervalMs: 50 };
  const stage1 = new LocalEventSourceMapping({ ...common, streamName: d.config.streamName, handler: createKinesisTriggerHandler(definition, options) });
  const stage2 = new LocalEventSourceMapping({ ...common, streamName: d.config.repartitionStreamName!, handler: createRepartitionTriggerHandler(definition, options) });
  return {
    results, stage2,
    /** One stage-1 batch per step: put, then drain the source's mapping alone. */
    async stage1Batches(steps: readonly (readonly Event[])[]) {
      for (const step of steps) {
        await d.put(step.map((ev) => ({ data: json(ev), partitionKey: 'p' })));
        await stage1.drain({ idleMs: 400 });
      }
    },
    async stop() {
      await Promise.all([stage1.stop(), stage2.stop()]);
    },
  };
}

/**
 * Each dead letter as the internal record it holds: one row, of stage-1 batch `batch`. Stage 1 sends
 * partial aggregates (`[max event time, ...keys, ...buffers]`: that batch's records of one group)
 * when they are at most half its rows, else the rows themselves (each one source record).
 */
async function heldOutRows(d: Deployment): Promise<{ batch: number; partial: boolean; k: string; row: readonly unknown[]; reason: string }[]> {
  const letters = await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix);
  return letters.map((l) => {
    const record = decodeRepartitionRecord(Buffer.from(l.dataBase64, 'base64'));
    expect(record.rows).toHaveLength(1);
    const row = record.rows[0]!;
    const partial = record.partial === true;
    return { batch: record.batch, partial, k: String(row[partial ? 1 : 0]), row, reason: l.reason };
  }).sort((a, b) => a.batch - b.batch || a.k.localeCompare(b.k));
}

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

describe('a long sum overflowing while stage 2 merges partial aggregates (DynamoDB Local, kinesis-mock)', () => {
  it('the partials whose merge raises are dead-lettered with their provenance; the rest commits; the sink is the answer without their records', async () => {
    expect(compileQuery(definition, { allowRepartition: true }).hops[0]!.partial).not.toBeNull();
    // Each step is one stage-1 batch, so one partial per key and step; each is within int64.
    // (Two records per group and step: stage 1 sends partials when they are at most half its rows.)
    const steps: Event[][] = [
      [e('a', B / 2n), e('a', B / 2n), e('b', 1n), e('b', 0n), e('c', 5n), e('c', 0n)],
      [e('a', B / 2n), e('b', 2n), e('a', B / 2n), e('b', 0n)], // a: 2^62 + 2^62 = 2^63 overflows: step 1's partial of a
      [e('a', -(B - 1n)), e('a', 0n)],
      [e('b', B), e('b', 0n), e('c', B), e('c', 0n)],
      [e('b', B), e('c', B - 5n), e('d', 7n), e('b', 0n), e('c', 0n), e('d', 0n)], // b and c reach 2^63 and more: step 4's partials of b and c
      [e('a', 3n), e('a', 0n), e('b', 2n), e('b', 0n), e('c', 1n), e('c', 0n)],
    ];
    const d = await deploy(emulators, definition, 1, { repartitionShards: 1, expectedShardCount: undefined });
    const p = pipeline(d, emulators);
    try {
      await p.stage1Batches(steps);
      // Stage 2 then reads every step's record in one batch: the overflows happen inside it.
      await p.stage2.drain({ idleMs: 600 });
    } finally {
      await p.stop();
    }

    expect(p.results.map((r) => r.error?.message).filter(Boolean)).toEqual([]);
    expect(p.stage2.stats.failedBatches).toBe(0);
    const partials = await heldOutRows(d);
    expect(partials.map(({ batch, k, partial }) => [batch, k, partial])).toEqual([[1, 'a', true], [4, 'b', true], [4, 'c', true]]);
    for (const l of partials) {
      expect(l.reason).toMatch(/^ARITHMETIC_OVERFLOW: /);
      expect(l.reason).toContain(`batch ${l.batch} on source partition shardId-000000000000`);
    }
    const kept = steps.flatMap((step, batch) => step.filter((ev) => !partials.some((l) => l.batch === batch && l.k === ev.k)));
    const table = await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!);
    expect(canonical(table)).toEqual(await answerOver(kept));
    // A re-drive never takes them for source records (their shard id is the internal stream's, which
    // repeats the source's): never into the source stream.
    const deployment = { ...d.config, sluiceQuery: definition.name };
    const intoStream = await redriveDeadLetters(d.clients, deployment, { dryRun: true });
    expect([intoStream.wouldRedrive, intoStream.notFromSource]).toEqual([0, 3]);
    // Through the query, they are put back on the internal stream for stage 2 (stage2-redrive.integration.test.ts), not run through stage 1.
    const throughQuery = await reprocessDeadLetters(d.clients, deployment, { definition, config: d.config, dryRun: true });
    expect([throughQuery.wouldRedrive, throughQuery.notFromSource, throughQuery.heldOutRows.wouldRedrive]).toEqual([0, 0, 3]);
    // Stage 2 ran one batch over all six records and counted the three partials left out.
    const stage2Batches = p.results.filter((r) => r.stage.kind === 'state').flatMap((r) => r.progress).filter((b) => b.numInputRows > 0);
    expect(stage2Batches).toHaveLength(1);
    expect(stage2Batches[0]!.numDeadLetteredRows).toBe(3);
  });

  it('from the state alone (the stored sum plus a new partial overflows): the new row is dead-lettered, and later rows keep merging', async () => {
    const d = await deploy(emulators, definition, 1, { repartitionShards: 1, expectedShardCount: undefined });
    const p = pipeline(d, emulators);
    const steps: Event[][] = [
      [e('a', B), e('b', 1n)],
      [e('a', B / 2n), e('a', B / 2n - 1n)], // a's stored sum is 2^63 - 1, int64's maximum
      [e('a', 1n), e('b', 1n)], // with the state alone, +1 overflows: this step's row of a (one row per group: rows cross, not partials)
      [e('a', -5n), e('b', 1n)],
      [e('a', 4n)], // 2^63 - 1 - 5 + 4: merges
    ];
    try {
      // One stage-2 batch per stage-1 batch: every overflow is the state plus one partial.
      for (const step of steps) {
        await p.stage1Batches([step]);
        await p.stage2.drain({ idleMs: 400 });
      }
    } finally {
      await p.stop();
    }

    expect(p.results.map((r) => r.error?.message).filter(Boolean)).toEqual([]);
    const held = await heldOutRows(d);
    // The row is the source record itself (after stage 1's stateless part): only it is left out.
    expect(held.map(({ batch, partial, row }) => [batch, partial, row])).toEqual([[2, false, ['a', 1]]]);
    expect(held[0]!.reason).toMatch(/^ARITHMETIC_OVERFLOW: .*a row of stage 1's batch 2 on source partition shardId-000000000000/s);
    const kept = steps.flatMap((step, batch) => step.filter((ev) => !(batch === 2 && ev.k === 'a')));
    const table = await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!);
    expect(canonical(table)).toEqual(await answerOver(kept));
    expect(table.find((r) => r.k === 'a')?.total).toBe(2n ** 63n - 2n);
  });
});
