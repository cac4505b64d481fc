/**
 * The fail-safe faults followed until their request is sent again (no emulators: a stub answers
 * each request). A commit transaction's conflict must be retried in the same invocation (the
 * checkpoint's own retry); a throttle elsewhere by any later invocation; never sent again fails.
 */
import { describe, expect, it } from 'vitest';
import { GetItemCommand, PutItemCommand, TransactWriteItemsCommand, type TransactWriteItem } from '@aws-sdk/client-dynamodb';
import { createAwsClients, type AwsClients } from '../../../lib/aws/clients.js';
import { FaultController, type PlannedFault } from '../../../lib/local/chaos/faults.js';
import { instrumentClients, type ContainerHandle } from '../../../lib/local/chaos/instrument.js';
import { dynamoDbSignature } from '../../../lib/local/chaos/retry-ledger.js';
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
  try { await send(); return undefined; } catch (e) { return (e as Error).name; }
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
    await attempt(later.clients, () => later.clients.dynamodb.send(new TransactWriteItemsCommand({ TransactItems: commit(true) })));
    later.container.invocation = 2; // the invocation failed; the mapping retried it
    await later.clients.dynamodb.send(new TransactWriteItemsCommand({ TransactItems: commit(true) }));
    expect(later.controller.retries.figures()['transaction-conflict']).toMatchObject({ later: 1 });
    expect(later.controller.retries.broken).toEqual([expect.stringMatching(/^transaction-conflict @0 .* sent again only later, where the engine retries it in place$/)]);

    const never = setUp([{ kind: 'transaction-conflict', at: 0 }]);
    await attempt(never.clients, () => never.clients.dynamodb.send(new TransactWriteItemsCommand({ TransactItems: commit(true) })));
    expect(never.controller.retries.broken).toEqual([expect.stringMatching(/never sent again$/)]);
    for (const c of [inPlace, later, never]) c.clients.destroy();
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

  it('signatures: one commit per partition whatever its conditions; other partitions and keys differ', () => {
    const a = dynamoDbSignature('TransactWriteItemsCommand', { TransactItems: commit(true) });
    expect(dynamoDbSignature('TransactWriteItemsCommand', { TransactItems: commit(false) })).toBe(a);
    const other = commit(false).map((t) => ({ Put: { ...t.Put!, Item: { ...t.Put!.Item!, pk: { S: 'q#shard-1' } } } }));
    expect(dynamoDbSignature('TransactWriteItemsCommand', { TransactItems: other })).not.toBe(a);
    expect(dynamoDbSignature('GetItemCommand', { TableName: 't', Key: key('a') })).not.toBe(dynamoDbSignature('GetItemCommand', { TableName: 't', Key: key('b') }));
  });
});
