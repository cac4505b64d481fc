/**
 * The on-failure handler and the skipped-range re-drive against the emulators: a range is recorded
 * once however often SQS delivers it; what cannot be recorded is handed back to SQS; a range whose
 * records were committed after all is not put back; records gone from the stream are counted lost.
 */
import { ListShardsCommand } from '@aws-sdk/client-kinesis';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { createAwsClients } from '../../lib/aws/clients.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { hourlySalesQuery } from '../../lib/local/dev/default-query.js';
import { createOnFailureHandler } from '../../lib/aws/on-failure-handler.js';
import { createQuietObservability } from '../../lib/aws/observability.js';
import { SkippedBatchStore } from '../../lib/aws/skipped-batches.js';
import { redriveSkippedBatches } from '../../lib/aws/skipped-batch-redrive.js';
import { inspectQuery } from '../../lib/aws/query-inspection.js';
import { deliverToOnFailureHandler, onFailureRecordOf, sqsEventOf } from '../../lib/local/on-failure-destination.js';
import type { BatchFailureInfo } from '../../lib/local/event-source-mapping.js';
import type { KinesisStreamEvent } from 'aws-lambda';
import { createKinesisTriggerHandler } from '../../lib/aws/kinesis-trigger-handler.js';
import { readDeadLetters } from '../../lib/aws/s3-dead-letter-writer.js';
import { deploy } from '../support/aws-pipeline.js';
import { committedAndGoneRanges, failureInfo } from '../support/skipped-ranges.js';

const QUERY = 'skipped-ranges';
let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

const sale = (i: number) => ({ store_id: ['north', 'south'][i % 2]!, amount: i + 1, ts: new Date(Date.UTC(2024, 4, 1, 14, i)).toISOString() });

describe('the on-failure handler', () => {
  it('records a range once however often it is delivered, drops what is not an on-failure record, hands back what it cannot record', async () => {
    const definition = hourlySalesQuery('update', QUERY);
    const { config } = await deploy(emulators, definition, 1);
    const observability = createQuietObservability(QUERY);
    const handler = createOnFailureHandler(definition, { config, clientOptions: emulators.clientOptions, observability });
    const arn = `arn:aws:kinesis:us-east-1:000000000000:stream/${config.streamName}`;
    const body = onFailureRecordOf(failureInfo(arn, '1000', '2000', 7));
    for (let i = 0; i < 3; i++) expect(await handler(sqsEventOf(body))).toEqual({ batchItemFailures: [] });
    expect(await handler(sqsEventOf('{"hello": "world"}'))).toEqual({ batchItemFailures: [] });
    const clients = createAwsClients(emulators.clientOptions);
    onTestFinished(() => clients.destroy());
    const store = new SkippedBatchStore({ client: clients.dynamodb, checkpointTable: config.checkpointTable, queryName: QUERY });
    const ranges = await store.list();
    expect(ranges).toHaveLength(1);
    expect(ranges[0]).toMatchObject({
      partitionId: 'shardId-000000000000', streamName: config.streamName, firstSequenceNumber: '1000', lastSequenceNumber: '2000', batchSize: 7, state: 'waiting',
    });
    expect(await store.list('shardId-000000000001')).toEqual([]);

    // No table to record in (a deployment error): SQS keeps the message and delivers it again.
    const broken = createOnFailureHandler(definition, { config: { ...config, checkpointTable: 'no-such-table' }, clientOptions: emulators.clientOptions, observability });
    const event = sqsEventOf(body);
    expect(await broken(event)).toEqual({ batchItemFailures: [{ itemIdentifier: event.Records[0]!.messageId }] });
    await expect(deliverToOnFailureHandler(broken, failureInfo(arn, '1', '2', 2))).rejects.toThrow(/did not record/);
  }, 120_000);
});

describe('redriveSkippedBatches', () => {
  it('leaves records a batch committed after all, counts records gone from the stream as expired, and marks each range once', async () => {
    const definition = hourlySalesQuery('update', QUERY);
    const deployment = await deploy(emulators, definition, 1);
    const { clients, config } = deployment;
    // Records 3..5 committed, their batch given up all the same; a range wholly past retention.
    const { seqs, gone } = await committedAndGoneRanges(deployment, definition, emulators);
    const store = new SkippedBatchStore({ client: clients.dynamodb, checkpointTable: config.checkpointTable, queryName: QUERY });
    expect((await store.list()).map((r) => [r.firstSequenceNumber, r.lastSequenceNumber])).toEqual([[seqs[3], seqs[5]], gone]);

    const descriptor = { ...config, sluiceQuery: QUERY };
    const before = await inspectQuery(clients, descriptor);
    expect({ healthy: before.healthy, waiting: before.skippedRanges.length, lost: before.lostRanges.length }).toEqual({ healthy: false, waiting: 2, lost: 0 });
    const report = await redriveSkippedBatches(clients, descriptor);
    expect(report).toMatchObject({ redriven: 0, deadLettered: 0, alreadyCommitted: 3, expired: 2, skippedAgain: 0, alreadyRedriven: 0 });
    expect(report.ranges.map((r) => r.outcome)).toEqual([
      { redriven: 0, deadLettered: 0, alreadyCommitted: 3, expired: 0, skippedAgain: 0 },
      { redriven: 0, deadLettered: 0, alreadyCommitted: 0, expired: 2, skippedAgain: 0, expiredRange: { first: gone[0], last: gone[1] } },
    ]);
    expect((await store.list()).map((r) => r.state)).toEqual(['redriven', 'redriven']);
    // Lost to retention: the query stays unhealthy, naming the lost sequence numbers; the re-driven committed range is done.
    const after = await inspectQuery(clients, descriptor);
    expect(after.healthy).toBe(false);
    expect(after.skippedRanges).toEqual([]);
    expect(after.lostRanges.map((r) => [r.firstSequenceNumber, r.outcome?.expired])).toEqual([[gone[0], 2]]);
    expect(after.problems.filter((p) => /expired/.test(p))).toEqual([
      `2 record(s) of the skipped range shardId-000000000000 ${gone[0]}..${gone[1]} expired from ${config.streamName} before the re-drive read them: lost `
      + `(sequence numbers ${gone[0]}..${gone[1]}); once seen: \`sluice redrive ${QUERY} --acknowledge shardId-000000000000#${gone[0]} --reason "..."\``,
    ]);
    expect(await redriveSkippedBatches(clients, descriptor)).toMatchObject({ ranges: [], alreadyRedriven: 2 });
    // Nothing was put back: the shard holds the six records it had.
    const shardId = (await clients.kinesis.send(new ListShardsCommand({ StreamName: config.streamName }))).Shards![0]!.ShardId!;
    expect(shardId).toBe('shardId-000000000000');
    expect(await readAll(deployment.clients, config.streamName, shardId)).toBe(6);
  }, 180_000);
});

describe('a re-driven record skipped again', () => {
  it('is dead-lettered with the reason instead of being re-driven in a loop', async () => {
    const definition = hourlySalesQuery('update', QUERY);
    const deployment = await deploy(emulators, definition, 1);
    const { clients, config } = deployment;
    const poison = JSON.stringify(sale(7));
    await deployment.put([{ data: JSON.stringify(sale(1)), partitionKey: sale(1).store_id }, { data: poison, partitionKey: sale(7).store_id }]);
    const observability = createQuietObservability(QUERY);
    const onFailure = createOnFailureHandler(definition, { config, clientOptions: emulators.clientOptions, observability });
    const run = createKinesisTriggerHandler(definition, { config, clientOptions: emulators.clientOptions, observability });
    // A record that crashes the function whatever its sequence number: the re-drive cannot help.
    const mapping = {
      handler: async (event: KinesisStreamEvent) => {
        if (event.Records.some((r) => Buffer.from(r.kinesis.data, 'base64').toString() === poison)) throw new Error('Runtime exited with error');
        return run(event);
      },
      maximumRetryAttempts: 0, onFailure: (info: BatchFailureInfo) => deliverToOnFailureHandler(onFailure, info),
    };
    await deployment.drain(mapping);
    const descriptor = { ...config, sluiceQuery: QUERY };
    // Put back into the stream (a one-stage stateful query's only way), where it crashes again.
    expect(await redriveSkippedBatches(clients, descriptor, { intoStream: true })).toMatchObject({ redriven: 1, deadLettered: 0, skippedAgain: 0 });
    await deployment.drain(mapping);
    const second = await redriveSkippedBatches(clients, descriptor, { intoStream: true });
    expect(second).toMatchObject({ redriven: 0, skippedAgain: 1, alreadyRedriven: 1 });
    const letters = await readDeadLetters(clients.s3, config.deadLetterBucket, `dead-letter/${QUERY}/`);
    expect(letters.map((l) => [Buffer.from(l.dataBase64, 'base64').toString(), l.reason.split(':')[0]])).toEqual([[poison, 'SKIPPED_AGAIN']]);
    expect(await redriveSkippedBatches(clients, descriptor, { intoStream: true })).toMatchObject({ redriven: 0, skippedAgain: 0, alreadyRedriven: 2 });
  }, 180_000);
});

async function readAll(clients: { kinesis: import('@aws-sdk/client-kinesis').KinesisClient }, streamName: string, shardId: string): Promise<number> {
  const { KinesisShardReader } = await import('../../lib/aws/kinesis-shard-reader.js');
  return (await new KinesisShardReader(clients.kinesis, streamName).readAfter(shardId, null)).records.length;
}
