/**
 * The fail-safe faults followed until their request is sent again (no emulators: a stub answers
 * each request). A commit transaction's conflict must be retried in the same invocation (the
 * checkpoint's own retry); a throttle elsewhere by any later invocation; never sent again fails.
 */
import { describe, expect, it } from 'vitest';
import { BatchWriteItemCommand, GetItemCommand, PutItemCommand, TransactWriteItemsCommand, type TransactWriteItem } from '@aws-sdk/client-dynamodb';
import { createAwsClients, type AwsClients } from '../../../lib/aws/clients.js';
import { ChaosKill, FaultController, type PlannedFault } from '../../../lib/local/chaos/faults.js';
import { instrumentClients, type ContainerHandle } from '../../../lib/local/chaos/instrument.js';
import { RetryLedger, dynamoDbSentSignatures, dynamoDbSignature } from '../../../lib/local/chaos/retry-ledger.js';
import { DynamoDbUpsertSink } from '../../../lib/aws/dynamodb-upsert-sink.js';
import type { SinkBatch } from '../../../lib/sinks/sink.js';
import { localDeployment, localRuntimeConfig } from '../../../lib/local/dev/local-stack.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';

const config = localRuntimeConfig(localDeployment('unit'), { shards: 1 });

function stubbed(): AwsClients {
  const clients = createAwsClients({ region: 'us-east-1', credentials: { accessKeyId: 'x', secretAccessKey: 'x' }, maxAttempts: 1 });
  (clients.dynamodb.middlewareStack as unknown as { add: (m: unknown, o: unknown) => void }).add(
    () => async () => ({ output: { $metadata: {} }, response: {} }), { step: 'serialize', name: 'stubService' });
  return clients;
}

const key = (sk: string) => ({ pk: { S: 'q#shard-0' }, sk: { S: sk } });
const commit = (withCheck: boolean): TransactWriteItem[] => [
  ...(withCheck ? [{ ConditionCheck: { TableName: config.checkpointTable, Key: key('commit#000000000004'), ConditionExpression: 'attribute_exists(pk)' } }] : []),
  { Put: { TableName: config.checkpointTable, Item: key('commit#000000000005'), ConditionExpression: 'attribute_not_exists(pk)' } },
];

async function attempt(clients: AwsClients, send: () => Promise<unknown>): Promise<string | undefined> {
  return (await thrown(send))?.name;
}

async function thrown(send: () => Promise<unknown>): Promise<Error | undefined> {
  try { await send(); return undefined; } catch (e) { return e as Error; }
}

/** Another container on the same function (a concurrent duplicate's, or the next one after a kill). */
function another(controller: FaultController, id: number): { clients: AwsClients; container: ContainerHandle } {
  const clients = stubbed();
  const container: ContainerHandle = { id, dead: false, invocation: 1 };
  instrumentClients(container, clients, { controller, config });
  return { clients, container };
}

function setUp(plan: PlannedFault[]): { clients: AwsClients; controller: FaultController; container: ContainerHandle } {
  const clients = stubbed();
  const controller = new FaultController(plan, () => 0.1);
  const container: ContainerHandle = { id: 1, dead: false, invocation: 1 };
  instrumentClients(container, clients, { controller, config });
  return { clients, controller, container };
}

describe('fail-safe faults: how their request was sent again', () => {
  it('a commit transaction\'s conflict retried in the same invocation (its items may change) passes; retried only by the next invocation, or never, is reported', async () => {
    const inPlace = setUp([{ kind: 'transaction-conflict', at: 0 }]);
    expect(await attempt(inPlace.clients, () => inPlace.clients.dynamodb.send(new TransactWriteItemsCommand({ TransactItems: commit(true) })))).toBe('TransactionCanceledException');
    // The retry drops the ConditionCheck (as the checkpoint's proving retry does): the same commit.
    await inPlace.clients.dynamodb.send(new TransactWriteItemsCommand({ TransactItems: commit(false) }));
    expect(inPlace.controller.retries.figures()).toEqual({ 'transaction-conflict': { faults: 1, inPlace: 1, later: 0, never: 0 } });
    expect(inPlace.controller.retries.broken).toEqual([]);

    const later = setUp([{ kind: 'transaction-conflict', at: 0 }]);
    const conflict = await thrown(() => later.clients.dynamodb.send(new TransactWriteItemsCommand({ TransactItems: commit(true) })));
    // The conflict ended the invocation (wrapped, as the engine reports it); the mapping retried it.
    later.controller.retries.ended(later.container, [new Error('batch failed', { cause: conflict })]);
    later.container.invocation = 2;
    await later.clients.dynamodb.send(new TransactWriteItemsCommand({ TransactItems: commit(true) }));
    expect(later.controller.retries.figures()['transaction-conflict']).toMatchObject({ later: 1 });
    expect(later.controller.retries.broken).toEqual([expect.stringMatching(/^transaction-conflict @0 .* sent again only later, where the engine retries it in place \(its invocation ended by the fault's own error\)$/)]);
    expect(later.controller.retries.excused).toEqual([]);

    // Swallowed: the invocation succeeded although the commit was never retried in it.
    const swallowed = setUp([{ kind: 'transaction-conflict', at: 0 }]);
    await attempt(swallowed.clients, () => swallowed.clients.dynamodb.send(new TransactWriteItemsCommand({ TransactItems: commit(true) })));
    swallowed.controller.retries.ended(swallowed.container, []);
    swallowed.container.invocation = 2;
    await swallowed.clients.dynamodb.send(new TransactWriteItemsCommand({ TransactItems: commit(true) }));
    expect(swallowed.controller.retries.broken).toEqual([expect.stringMatching(/\(its invocation succeeded without the retry\)$/)]);

    const never = setUp([{ kind: 'transaction-conflict', at: 0 }]);
    await attempt(never.clients, () => never.clients.dynamodb.send(new TransactWriteItemsCommand({ TransactItems: commit(true) })));
    expect(never.controller.retries.broken).toEqual([expect.stringMatching(/never sent again$/)]);
    for (const c of [inPlace, later, swallowed, never]) c.clients.destroy();
  });

  it('a throttled checkpoint read is retried by a later invocation; a throttled sink upsert must be retried in place', async () => {
    const { clients, controller, container } = setUp([{ kind: 'throttle-dynamodb', at: 0 }, { kind: 'throttle-dynamodb', at: 2 }]);
    const read = () => clients.dynamodb.send(new GetItemCommand({ TableName: config.checkpointTable, Key: key('offset#000000000005') }));
    const upsert = (sk: string) => () => clients.dynamodb.send(new PutItemCommand({ TableName: config.sinkTable, Item: key(sk) }));
    expect(await attempt(clients, read)).toBe('ProvisionedThroughputExceededException');
    container.invocation = 2;
    await read();
    expect(await attempt(clients, upsert('row-a'))).toMatch(/Throughput|Throttling|RequestLimit/);
    await upsert('row-b')(); // another row, not the throttled one: no retry of it
    expect(controller.retries.figures()['throttle-dynamodb']).toEqual({ faults: 2, inPlace: 0, later: 1, never: 1 });
    expect(controller.retries.broken).toEqual([expect.stringMatching(/^throttle-dynamodb @2 \(PutItemCommand .*\) never sent again$/)]);
    clients.destroy();
  });

  it('a throttled sink upsert sent again only by a later invocation passes when its invocation ended by another error first (another item\'s kill)', async () => {
    const { clients, controller, container } = setUp([{ kind: 'throttle-dynamodb', at: 0 }]);
    const upsert = (c: AwsClients) => c.dynamodb.send(new PutItemCommand({ TableName: config.sinkTable, Item: key('row-a') }));
    expect(await attempt(clients, () => upsert(clients))).toMatch(/Throughput|Throttling|RequestLimit/);
    // While it backs off, another item's write kills the process: the batch is aborted, its retry never comes.
    container.dead = true;
    controller.retries.ended(container, [new Error('PutItem into the sink failed', { cause: new ChaosKill('chaos: process killed in the middle of the DynamoDB sink upserts') })]);
    const next = another(controller, 2);
    await upsert(next.clients);
    expect(controller.retries.figures()['throttle-dynamodb']).toEqual({ faults: 1, inPlace: 0, later: 1, never: 0 });
    expect(controller.retries.broken).toEqual([]);
    expect(controller.retries.excused).toEqual([expect.stringMatching(/^throttle-dynamodb @0 .* sent again later: its invocation ended by another error first: .*process killed/)]);
    for (const c of [clients, next.clients]) c.destroy();
  });

  it('a throttled sink upsert whose own error ended the invocation fails, even wrapped and resent by another invocation; given up after a retry in place passes', async () => {
    const upsert = (c: AwsClients, sk: string) => () => c.dynamodb.send(new PutItemCommand({ TableName: config.sinkTable, Item: key(sk) }));
    // The writer has no retry: the throttle (as the sink wraps it) ends the invocation.
    const missing = setUp([{ kind: 'throttle-dynamodb', at: 0 }]);
    const throttle = await thrown(upsert(missing.clients, 'row-a'));
    missing.controller.retries.ended(missing.container, [new Error('sink throttled', { cause: throttle })]);
    missing.container.invocation = 2;
    await upsert(missing.clients, 'row-a')();
    expect(missing.controller.retries.broken).toEqual([expect.stringMatching(/^throttle-dynamodb @0 .* \(its invocation ended by the fault's own error\)$/)]);

    // Retried in place, throttled again, then given up (its retries ran out): the retry is there.
    const gaveUp = setUp([{ kind: 'throttle-dynamodb', at: 0 }, { kind: 'throttle-dynamodb', at: 1 }]);
    await attempt(gaveUp.clients, upsert(gaveUp.clients, 'row-b'));
    const last = await thrown(upsert(gaveUp.clients, 'row-b'));
    gaveUp.controller.retries.ended(gaveUp.container, [new Error('sink throttled', { cause: last })]);
    gaveUp.container.invocation = 2;
    await upsert(gaveUp.clients, 'row-b')();
    expect(gaveUp.controller.retries.figures()['throttle-dynamodb']).toEqual({ faults: 2, inPlace: 1, later: 1, never: 0 });
    expect(gaveUp.controller.retries.broken).toEqual([]);
    expect(gaveUp.controller.retries.excused).toEqual([expect.stringMatching(/^throttle-dynamodb @1 .* retried in place before, then given up/)]);
    for (const c of [missing, gaveUp]) c.clients.destroy();
  });

  it('the DynamoDB sink\'s adaptive writer: a throttled upsert is retried in place, so the check passes (it fails where the writer lacks the retry)', async () => {
    const { clients, controller, container } = setUp([{ kind: 'throttle-dynamodb', at: 1 }]);
    const sink = new DynamoDbUpsertSink({ client: clients.dynamodb, tableName: config.sinkTable!, keyColumns: ['store'] });
    const schema = [{ name: 'store', type: 'string' as const }, { name: 'revenue', type: 'long' as const }];
    const batch: SinkBatch = { partitionId: 'p', batchId: 1, rows: [['north', 1], ['south', 2], ['east', 3]], schema, columns: ['store', 'revenue'], outputMode: 'update' };
    const error = await thrown(() => sink.addBatch(batch));
    controller.retries.ended(container, error ? [error] : []);
    // Without the retry in place the mapping's retry (the next invocation) writes the batch again.
    container.invocation = 2;
    await sink.addBatch(batch);
    expect(controller.retries.broken).toEqual([]);
    expect(controller.retries.figures()['throttle-dynamodb']).toEqual({ faults: 1, inPlace: 1, later: 0, never: 0 });
    clients.destroy();
  });

  it('a concurrent duplicate writing the same key while the throttled invocation still runs is not its retry: the retry in place still counts', async () => {
    const { clients, controller, container } = setUp([{ kind: 'throttle-dynamodb', at: 0 }]);
    const duplicate = another(controller, 2);
    const upsert = (c: AwsClients) => () => c.dynamodb.send(new PutItemCommand({ TableName: config.sinkTable, Item: key('row-a') }));
    expect(await attempt(clients, upsert(clients))).toMatch(/Throughput|Throttling|RequestLimit/);
    await upsert(duplicate.clients)(); // the duplicate's container writes the key first
    await upsert(clients)(); // then the throttled one retries it in place
    controller.retries.ended(container, []);
    expect(controller.retries.figures()['throttle-dynamodb']).toEqual({ faults: 1, inPlace: 1, later: 0, never: 0 });
    expect(controller.retries.broken).toEqual([]);

    // Its invocation failed by another error before its retry: the duplicate's write was its resend.
    const other = setUp([{ kind: 'throttle-dynamodb', at: 0 }]);
    const rival = another(other.controller, 2);
    await attempt(other.clients, upsert(other.clients));
    await upsert(rival.clients)();
    other.controller.retries.ended(other.container, [new Error('a stale writer: the conditional write failed')]);
    expect(other.controller.retries.figures()['throttle-dynamodb']).toEqual({ faults: 1, inPlace: 0, later: 1, never: 0 });
    expect(other.controller.retries.broken).toEqual([]);
    for (const c of [clients, duplicate.clients, other.clients, rival.clients]) c.destroy();
  });

  it('signatures: one commit per partition whatever its conditions; other partitions and keys differ', () => {
    const a = dynamoDbSignature('TransactWriteItemsCommand', { TransactItems: commit(true) });
    expect(dynamoDbSignature('TransactWriteItemsCommand', { TransactItems: commit(false) })).toBe(a);
    const other = commit(false).map((t) => ({ Put: { ...t.Put!, Item: { ...t.Put!.Item!, pk: { S: 'q#shard-1' } } } }));
    expect(dynamoDbSignature('TransactWriteItemsCommand', { TransactItems: other })).not.toBe(a);
    expect(dynamoDbSignature('GetItemCommand', { TableName: 't', Key: key('a') })).not.toBe(dynamoDbSignature('GetItemCommand', { TableName: 't', Key: key('b') }));
  });

  it('a throttled read never sent again is reported, not broken (the retry may not need it); a write never sent again is broken', () => {
    const ledger = new RetryLedger();
    const read = { TableName: 'checkpoint', Key: key('offset#000000000001') };
    const write = { TableName: 'checkpoint', Item: key('offset#000000000002') };
    ledger.failed('throttle-dynamodb', 1, 'GetItemCommand checkpoint', dynamoDbSignature('GetItemCommand', read), { id: 1, invocation: 1 }, false);
    ledger.failed('throttle-dynamodb', 2, 'PutItemCommand checkpoint', dynamoDbSignature('PutItemCommand', write), { id: 1, invocation: 1 }, false);
    expect(ledger.figures()['throttle-dynamodb']).toMatchObject({ faults: 2, never: 2 });
    expect(ledger.broken).toEqual(['throttle-dynamodb @2 (PutItemCommand checkpoint) never sent again']);
  });

  it('a throttled offset-log put-if-absent whose entry a concurrent duplicate wrote first is excused; one nobody wrote, never sent again, is broken', async () => {
    const { clients, controller, container } = setUp([{ kind: 'throttle-dynamodb', at: 1 }, { kind: 'throttle-dynamodb', at: 2 }]);
    const rival = another(controller, 2);
    const plan = (c: AwsClients, sk: string) => () => c.dynamodb.send(new PutItemCommand({
      TableName: config.checkpointTable, Item: key(sk), ConditionExpression: 'attribute_not_exists(pk)',
    }));
    // Both containers read the log before either planned batch 5: the rival's plan lands first.
    await plan(rival.clients, 'offset#000000000005')();
    expect(await attempt(clients, plan(clients, 'offset#000000000005'))).toMatch(/Throughput|Throttling|RequestLimit/);
    // Batch 6 was planned by nobody: its throttled write must be sent again.
    expect(await attempt(clients, plan(clients, 'offset#000000000006'))).toMatch(/Throughput|Throttling|RequestLimit/);
    container.invocation = 2;
    expect(controller.retries.broken).toEqual([`throttle-dynamodb @2 (PutItemCommand ${config.checkpointTable} offset#000000000006) never sent again`]);
    expect(controller.retries.excused).toEqual([
      `throttle-dynamodb @1 (PutItemCommand ${config.checkpointTable} offset#000000000005) never sent again: its item was written before the fault (a resend could only be refused)`,
    ]);
    clients.destroy();
    rival.clients.destroy();
  });

  it('a throttled BatchWriteItem counts as sent again when a later batch holds its first request among others (regrouped)', () => {
    const put = (sk: string) => ({ PutRequest: { Item: key(sk) } });
    const first = { RequestItems: { state: [put('d#1'), put('d#2')] } };
    const regrouped = { RequestItems: { state: [put('d#0'), put('d#1'), put('d#2')] } };
    const ledger = new RetryLedger();
    ledger.failed('throttle-dynamodb', 3, 'BatchWriteItemCommand state', dynamoDbSignature('BatchWriteItemCommand', first), { id: 1, invocation: 1 }, false);
    expect(dynamoDbSignature('BatchWriteItemCommand', regrouped)).not.toBe(dynamoDbSignature('BatchWriteItemCommand', first));
    for (const sent of dynamoDbSentSignatures('BatchWriteItemCommand', regrouped)) ledger.sent(sent, { id: 2, invocation: 1 });
    expect(ledger.broken).toEqual([]);
    expect(ledger.figures()['throttle-dynamodb']).toMatchObject({ faults: 1, later: 1 });
  });
  it('a throttled cleanup delete (BatchWriteItem of deletes outside the sink, e.g. a kept copy\'s pages) never sent again is excused; a batch with a put is broken', async () => {
    // Seed 1 with --expire-planned: a stage-2 BatchWriteItem throttled @61 and never sent again failed the run.
    const { clients, controller, container } = setUp([{ kind: 'throttle-dynamodb', at: 0 }, { kind: 'throttle-dynamodb', at: 1 }]);
    const batch = (requests: object[]) => () => clients.dynamodb.send(new BatchWriteItemCommand({ RequestItems: { [config.checkpointTable]: requests as never } }));
    const del = (sk: string) => ({ DeleteRequest: { Key: key(sk) } });
    expect(await attempt(clients, batch([del('page#shard-0#100#3#0000'), del('page#shard-0#100#3#0001')]))).toMatch(/Throughput|Throttling|RequestLimit/);
    expect(await attempt(clients, batch([del('s#1'), { PutRequest: { Item: key('s#2') } }]))).toMatch(/Throughput|Throttling|RequestLimit/);
    container.invocation = 2;
    expect(controller.retries.broken).toEqual([`throttle-dynamodb @1 (BatchWriteItemCommand ${config.checkpointTable} delete q#shard-0 s#1 (+1 more)) never sent again`]);
    expect(controller.retries.excused).toEqual([
      `throttle-dynamodb @0 (BatchWriteItemCommand ${config.checkpointTable} delete q#shard-0 page#shard-0#100#3#0000 (+1 more)) never sent again: `
        + 'a best-effort cleanup delete (its items are read no more; a TTL or a later purge removes them)',
    ]);
    clients.destroy();
  });
});
