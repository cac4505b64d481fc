/**
 * Issue 11 on the emulators: every dead letter a stage reading an internal stream writes carries
 * the `@internal` mark, not only its held-out rows. Stage 2's result rows the sink refuses (a
 * grouping value past DynamoDB's 2048-byte key) are dead-lettered as `result-batch-…`; filed under
 * the bare internal shard id (which repeats the source stream's), a re-drive took them for source
 * records: into the source stream, or through stage 1. Both re-drives, dry and real, now leave
 * them (`resultRows`: output rows, not records) and still re-drive the source record stage 1 dead-lettered.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineQuery } from '../../lib/query/query-definition.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { readDeadLetters } from '../../lib/aws/s3-dead-letter-writer.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { redriveDeadLetters } from '../../lib/aws/dead-letter-redrive.js';
import { reprocessDeadLetters } from '../../lib/aws/dead-letter-reprocess.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { col, count, lit, sum, window } from '../../lib/plan/functions.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { deploy } from '../support/aws-pipeline.js';
import { sourceRecords } from '../support/source-stream-records.js';

const totals = (df: DataFrame): DataFrame => df.groupBy(col('k')).agg(sum(col('amount')).as('total'), count('*').as('n'));
// No partition key: the grouping needs the repartition stage, whose stage 2 writes the sink.
const definition = defineQuery({
  name: 'stage2-result-letters', source: { schema: 'k string, amount long' }, transform: totals, outputMode: 'update',
  sink: { kind: 'dynamodb', keyColumns: ['k'] },
});

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

describe('dead letters of stage 2 other than held-out rows (DynamoDB Local, kinesis-mock, s3rver)', () => {
  it('a result row the sink refuses is filed under <shard>@internal; neither re-drive takes it for a source record', async () => {
    expect(compileQuery(definition, { allowRepartition: true }).hops).toHaveLength(1);
    const d = await deploy(emulators, definition, 1, { repartitionShards: 1, expectedShardCount: undefined });
    const longKey = 'x'.repeat(3000);
    const events = [
      ...['a', 'b', 'a'].map((k, i) => JSON.stringify({ k, amount: i + 1 })),
      JSON.stringify({ k: longKey, amount: 7 }),
      '{"k": "broken', // stage 1 dead-letters this source record: the control that still re-drives
      JSON.stringify({ k: 'b', amount: 10 }),
    ];
    await d.put(events.map((data, i) => ({ data, partitionKey: `p${i}` })));
    await d.drain({ maximumRetryAttempts: 3 });
    expect(d.results.map((r) => r.result.error?.message).filter(Boolean)).toEqual([]);

    const letters = await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix);
    const fromStage2 = letters.filter((l) => l.sequenceNumber.startsWith('result-batch-'));
    const fromSource = letters.filter((l) => !l.sequenceNumber.startsWith('result-batch-'));
    expect(fromStage2).toHaveLength(1);
    expect(fromStage2[0]!.reason).toMatch(/SINK_KEY_TOO_LONG/);
    expect(fromSource.map((l) => Buffer.from(l.dataBase64, 'base64').toString())).toEqual(['{"k": "broken']);
    const sinkBefore = await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!);
    expect(sinkBefore.map((r) => [r.k, String(r.total), Number(r.n)]).sort()).toEqual([['a', '4', 2], ['b', '12', 2]]);
    const streamBefore = await sourceRecords(d);
    expect(streamBefore).toEqual(events);

    const deployment = { ...d.config, sluiceQuery: definition.name };
    const dryInto = await redriveDeadLetters(d.clients, deployment, { dryRun: true });
    expect([dryInto.wouldRedrive, dryInto.resultRows]).toEqual([1, 1]);
    const dryThrough = await reprocessDeadLetters(d.clients, deployment, { definition, config: d.config, dryRun: true });
    expect([dryThrough.wouldRedrive, dryThrough.resultRows]).toEqual([1, 1]);
    // Why: its shard id repeats the source shard's, so it carries the mark.
    expect(fromStage2[0]!.shardId).toBe('shardId-000000000000@internal');
    expect(fromSource[0]!.shardId).toBe('shardId-000000000000');

    // Through the query: only the source record runs through stage 1 (and fails again, under its re-drive's partition).
    const through = await reprocessDeadLetters(d.clients, deployment, { definition, config: d.config });
    expect(through.resultRows).toBe(1);
    expect(through.runs.map((r) => [r.partitionId.split('@')[0], r.records])).toEqual([['shardId-000000000000', 1]]);
    expect(through.reprocessed).toBe(1);
    const after = await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix);
    const rerun = after.filter((l) => !letters.some((o) => o.shardId === l.shardId && o.sequenceNumber === l.sequenceNumber));
    expect(rerun.map((l) => Buffer.from(l.dataBase64, 'base64').toString())).toEqual(['{"k": "broken']);

    // Into the stream: the source record was re-driven (the ledger knows), the stage-2 letter is left; the stream is unchanged.
    const into = await redriveDeadLetters(d.clients, deployment);
    expect(into.redriven).toEqual([]);
    expect(into.resultRows).toBe(1);
    expect(into.alreadyRedriven + into.failedAgain.length).toBe(2);
    expect(await sourceRecords(d)).toEqual(events);
    expect((await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!)).map((r) => [r.k, String(r.total), Number(r.n)]).sort())
      .toEqual([['a', '4', 2], ['b', '12', 2]]);
  });

  it('into the stream first: only the source record goes back into the source stream', async () => {
    const d = await deploy(emulators, definition, 1, { repartitionShards: 1, expectedShardCount: undefined });
    const events = [JSON.stringify({ k: 'a', amount: 1 }), JSON.stringify({ k: 'y'.repeat(3000), amount: 2 }), '{"k": "broken'];
    await d.put(events.map((data, i) => ({ data, partitionKey: `p${i}` })));
    await d.drain({ maximumRetryAttempts: 3 });
    expect(d.results.map((r) => r.result.error?.message).filter(Boolean)).toEqual([]);
    const deployment = { ...d.config, sluiceQuery: definition.name };
    const into = await redriveDeadLetters(d.clients, deployment);
    expect(await sourceRecords(d)).toEqual([...events, '{"k": "broken']);
    expect(into.resultRows).toBe(1);
    expect(into.redriven.map((r) => r.shardId)).toEqual(['shardId-000000000000']);
    const letters = await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix);
    expect(letters.map((l) => l.shardId).sort()).toEqual(['shardId-000000000000', 'shardId-000000000000@internal']);
    // Through the query afterwards: the source record is claimed, the stage-2 letter left; nothing runs.
    const through = await reprocessDeadLetters(d.clients, deployment, { definition, config: d.config });
    expect([through.runs.length, through.reprocessed, through.resultRows]).toEqual([0, 0, 1]);
  });

  it('a row raising above state in stage 2 (a window whose sum is 0, emitted from state by a later batch) is filed under <shard>@internal; both re-drives leave it', async () => {
    const at = (seconds: number): string => new Date(Date.UTC(2024, 4, 1, 12) + seconds * 1000).toISOString();
    const ratio = defineQuery({
      name: 'stage2-raising-row', source: { schema: 'k string, amount long, ts timestamp' }, outputMode: 'append',
      sink: { kind: 'dynamodb', keyColumns: ['start', 'k'] },
      transform: (df) => df.withWatermark('ts', '10 seconds').groupBy(window(col('ts'), '10 seconds'), col('k'))
        .agg(sum(col('amount')).as('s'), count('*').as('n'))
        .select(col('window.start').as('start'), col('k'), lit(100).divide(col('s')).as('r'), col('n')),
    });
    const d = await deploy(emulators, ratio, 1, { repartitionShards: 1, expectedShardCount: undefined });
    // Window 12:00:00 of 'z' sums to 0; the later steps move the watermark past it, so a batch without its rows emits it.
    const steps = [[{ k: 'z', amount: 3, ts: at(1) }, { k: 'z', amount: -3, ts: at(2) }, { k: 'a', amount: 4, ts: at(3) }], [{ k: 'a', amount: 1, ts: at(60) }], [{ k: 'a', amount: 1, ts: at(120) }]];
    const events = steps.map((step) => step.map((e) => JSON.stringify(e)));
    await d.drainInSteps(steps.length, async (i) => d.put(events[i]!.map((data, j) => ({ data, partitionKey: `p${j}` }))));
    expect(d.results.map((r) => r.result.error?.message).filter(Boolean)).toEqual([]);
    const letters = await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix);
    const deployment = { ...d.config, sluiceQuery: ratio.name };
    for (const dryRun of [true, false]) {
      const into = await redriveDeadLetters(d.clients, deployment, { dryRun });
      expect([into.wouldRedrive, into.redriven.length, into.resultRows]).toEqual([0, 0, 1]);
      const through = await reprocessDeadLetters(d.clients, deployment, { definition: ratio, config: d.config, dryRun });
      expect([through.wouldRedrive, through.runs.length, through.resultRows]).toEqual([0, 0, 1]);
    }
    expect(await sourceRecords(d)).toEqual(events.flat());
    expect(letters.map((l) => [l.shardId, l.sequenceNumber.startsWith('result-batch-'), /^DIVIDE_BY_ZERO/.test(l.reason)]))
      .toEqual([['shardId-000000000000@internal', true, true]]);
    expect(letters[0]!.reason).toMatch(/a row above a stateful operator/);
  });
});
