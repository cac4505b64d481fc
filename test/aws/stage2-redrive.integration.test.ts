/**
 * Issue 11 on the emulators: re-driving what stage 2 held out. A long sum merging a partial
 * aggregate past int64 is dead-lettered by stage 2 (the partial itself, named by source partition
 * and stage-1 batch); once the stored sum has come down (later negative amounts) and the fixed
 * query is deployed, `sluice redrive` puts the partial back on the internal stream, tagged, and the
 * real stage-2 handler applies it once: the sink equals the in-memory answer over every record.
 * A second re-drive changes nothing; a copy put back twice (a re-drive that died before confirming)
 * is applied once; a fix that changes the partial's buffers (a widened type) is refused, with why.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { defineQuery, type QueryDefinition } from '../../lib/query/query-definition.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { readDeadLetters } from '../../lib/aws/s3-dead-letter-writer.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { createKinesisTriggerHandler, createRepartitionTriggerHandler } from '../../lib/aws/kinesis-trigger-handler.js';
import { createQuietObservability } from '../../lib/aws/observability.js';
import { reprocessDeadLetters } from '../../lib/aws/dead-letter-reprocess.js';
import { ledgerPkOf } from '../../lib/aws/through-query-redrive.js';
import { LocalEventSourceMapping } from '../../lib/local/event-source-mapping.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { col, count, sum } from '../../lib/plan/functions.js';
import type { ShardInvocationResult } from '../../lib/query/shard-invocation.js';
import { decodeRepartitionRecord } from '../../lib/sources/repartition-records.js';
import { deploy, type Deployment } from '../support/aws-pipeline.js';
import { answerInMemory } from '../support/data-error-runs.js';

const NAME = 'stage2-redrive';
const SCHEMA = 'k string, amount long';
const totals = (df: DataFrame): DataFrame => df.groupBy(col('k')).agg(sum(col('amount')).as('total'), count('*').as('n'));
const query = (transform: (df: DataFrame) => DataFrame): QueryDefinition => defineQuery({
  name: NAME, source: { schema: SCHEMA }, transform, outputMode: 'update', sink: { kind: 'dynamodb', keyColumns: ['k'] },
});
// No partition key: the grouping needs the repartition stage, stage 1 sends partial sums.
const deployed = query(totals);
/** The fixed module: the same plan (its state is the deployed one's), loaded anew, as a deploy would. */
const fixed = query((df) => df.groupBy(col('k')).agg(sum(col('amount')).as('total'), count('*').as('n')));
/** A "fix" that widens the sum: its partial's buffer is a decimal sum's [sum, count], not a long. */
const widened = query((df) => df.groupBy(col('k')).agg(sum(col('amount').cast('decimal(38,0)')).as('total'), count('*').as('n')));

interface Event { k: string; amount: bigint }
const B = 2n ** 62n;
const e = (k: string, amount: bigint): Event => ({ k, amount });
const json = (ev: Event): string => `{"k":"${ev.k}","amount":${ev.amount}}`;
const canonical = (rows: Record<string, unknown>[]): string[] => rows.map((r) => JSON.stringify([r.k, String(r.total), Number(r.n)])).sort();

function mapping(d: Deployment, emulators: EmulatorSet, definition: QueryDefinition, stage: 1 | 2, results: ShardInvocationResult[]) {
  const options = {
    config: d.config, clientOptions: emulators.clientOptions, observability: createQuietObservability(definition.name),
    onInvocation: (_shardId: string, result: ShardInvocationResult) => { results.push(result); },
  };
  return new LocalEventSourceMapping({
    kinesis: d.clients.kinesis, batchSize: 1000, maximumRetryAttempts: 2, bisectBatchOnFunctionError: true, pollIntervalMs: 50,
    streamName: stage === 1 ? d.config.streamName : d.config.repartitionStreamName!,
    handler: stage === 1 ? createKinesisTriggerHandler(definition, options) : createRepartitionTriggerHandler(definition, options),
  });
}

/** Stage 2 of `definition` (a fresh mapping, as after a deploy) reads the internal stream to its end. */
async function drainStage2(d: Deployment, emulators: EmulatorSet, definition: QueryDefinition, results: ShardInvocationResult[]): Promise<void> {
  const stage2 = mapping(d, emulators, definition, 2, results);
  try {
    await stage2.drain({ idleMs: 500 });
    expect(stage2.stats.failedBatches).toBe(0);
  } finally {
    await stage2.stop();
  }
}

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

describe('sluice redrive of the partials stage 2 held out (DynamoDB Local, kinesis-mock)', () => {
  it('puts the held-out partial back on the internal stream; the fixed stage 2 applies it once; the sink is the answer over every record', async () => {
    const steps: Event[][] = [
      [e('a', B), e('a', 0n), e('b', 1n), e('b', 0n)],
      [e('a', B / 2n), e('a', B / 2n - 1n)], // a's stored sum: 2^63 - 1, int64's maximum
      [e('a', 1n), e('a', 2n), e('a', -2n), e('b', 1n), e('b', 0n)], // a's partial (sum 1, 3 records) overflows the stored sum: held out
      [e('a', -5n), e('a', 0n), e('b', 1n), e('b', 0n)],
      [e('a', 3n), e('a', 0n)], // 2^63 - 1 - 5 + 3: merges
    ];
    const d = await deploy(emulators, deployed, 1, { repartitionShards: 1, expectedShardCount: undefined });
    const results: ShardInvocationResult[] = [];
    const stage1 = mapping(d, emulators, deployed, 1, results);
    const stage2 = mapping(d, emulators, deployed, 2, results);
    try {
      // One stage-1 batch per step, and one stage-2 batch after each: every overflow is the state plus one partial.
      for (const step of steps) {
        await d.put(step.map((ev) => ({ data: json(ev), partitionKey: 'p' })));
        await stage1.drain({ idleMs: 400 });
        await stage2.drain({ idleMs: 400 });
      }
    } finally {
      await Promise.all([stage1.stop(), stage2.stop()]);
    }
    expect(results.map((r) => r.error?.message).filter(Boolean)).toEqual([]);
    const letters = await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix);
    expect(letters).toHaveLength(1);
    const held = decodeRepartitionRecord(Buffer.from(letters[0]!.dataBase64, 'base64'));
    expect([held.batch, held.partial, held.rows[0]![1], String(held.rows[0]![2])]).toEqual([2, true, 'a', '1']);
    expect(letters[0]!.reason).toMatch(/^ARITHMETIC_OVERFLOW: /);

    const sink = async () => canonical(await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!));
    const without = steps.flatMap((step, batch) => step.filter((ev) => !(batch === 2 && ev.k === 'a')));
    // In memory the stored sum never passes int64's maximum when the negative amounts come first (a sum does not depend on the order).
    const all = [...steps[0]!, ...steps[1]!, ...steps[3]!, ...steps[2]!, ...steps[4]!];
    const answerOver = async (events: readonly Event[]) => canonical(await answerInMemory(SCHEMA, totals, events.map((ev) => [ev.k, ev.amount])));
    expect(await sink()).toEqual(await answerOver(without));

    const deployment = { ...d.config, sluiceQuery: NAME };
    // A fix that changes the partial's buffer: refused with why, nothing put back.
    const refused = await reprocessDeadLetters(d.clients, deployment, { definition: widened, config: d.config, dryRun: true });
    expect(refused.heldOutRows.wouldRedrive).toBe(0);
    expect(refused.heldOutRows.refused.map((r) => r.reason)).toEqual([expect.stringMatching(/widened type/)]);
    expect(refused.notFromSource).toBe(0);

    const first = await reprocessDeadLetters(d.clients, deployment, { definition: fixed, config: d.config });
    expect(first.heldOutRows.redriven.map((r) => r.id)).toEqual([`${letters[0]!.shardId}/${letters[0]!.sequenceNumber}`]);
    expect([first.heldOutRows.refused, first.heldOutRows.failedAgain, first.notFromSource]).toEqual([[], [], 0]);
    await drainStage2(d, emulators, fixed, results);
    expect(results.map((r) => r.error?.message).filter(Boolean)).toEqual([]);
    const expected = await answerOver(all);
    expect(expected).toContain(JSON.stringify(['a', String(2n ** 63n - 2n), 11]));
    expect(await sink()).toEqual(expected);

    // Again: the ledger says it was put back; nothing is sent, the sink stays.
    const second = await reprocessDeadLetters(d.clients, deployment, { definition: fixed, config: d.config });
    expect([second.heldOutRows.redriven.length, second.heldOutRows.alreadyRedriven]).toEqual([0, 1]);
    await drainStage2(d, emulators, fixed, results);
    expect(await sink()).toEqual(expected);

    // A re-drive that died after its put, before confirming: the next one sends the row again; stage 2 applies it once.
    await d.clients.dynamodb.send(new UpdateItemCommand({
      TableName: d.config.checkpointTable, Key: { pk: { S: ledgerPkOf(NAME) }, sk: { S: first.heldOutRows.redriven[0]!.id } },
      UpdateExpression: 'REMOVE newShardId, newSequenceNumber',
    }));
    const third = await reprocessDeadLetters(d.clients, deployment, { definition: fixed, config: d.config });
    expect(third.heldOutRows.redriven).toHaveLength(1);
    await drainStage2(d, emulators, fixed, results);
    expect(results.map((r) => r.error?.message).filter(Boolean)).toEqual([]);
    expect(await sink()).toEqual(expected);
    // No new dead letter: nothing raised again.
    expect(await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix)).toHaveLength(1);
  });
});
