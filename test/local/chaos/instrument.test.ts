/**
 * The fault middleware's own checks, without emulators (a stub answers each request where the
 * SDK would send it): UnprocessedItems handed back must be sent again (a purge that drops them
 * leaves items behind, invisible to every other check), and records past the trim horizon
 * ('planned-then-expired') are left out of GetRecords pages.
 */
import { describe, expect, it } from 'vitest';
import { BatchWriteItemCommand, type WriteRequest } from '@aws-sdk/client-dynamodb';
import { GetRecordsCommand, GetShardIteratorCommand } from '@aws-sdk/client-kinesis';
import { batchWriteAll } from '../../../lib/aws/dynamodb-cost.js';
import { ExpiredRecords } from '../../../lib/local/chaos/chaos-function.js';
import { FaultController } from '../../../lib/local/chaos/faults.js';
import { instrumentClients, type ContainerHandle } from '../../../lib/local/chaos/instrument.js';
import { localDeployment, localRuntimeConfig } from '../../../lib/local/dev/local-stack.js';
import type { AwsClients } from '../../../lib/aws/clients.js';
import { stubbedClients } from '../../support/stubbed-aws-clients.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';

const config = localRuntimeConfig(localDeployment('unit'), { shards: 1 });

const deletes = (n: number): WriteRequest[] => Array.from({ length: n }, (_, i) => ({ DeleteRequest: { Key: { pk: { S: 'q#p' }, sk: { S: `d#${i}` } } } }));

describe('instrumentClients: BatchWriteItem UnprocessedItems', () => {
  const setUp = (): { clients: AwsClients; controller: FaultController; container: ContainerHandle; applied: string[] } => {
    const applied: string[] = [];
    const clients = stubbedClients((command, input) => {
      if (command === 'BatchWriteItemCommand') {
        for (const r of Object.values(input.RequestItems as Record<string, WriteRequest[]>).flat()) applied.push(r.DeleteRequest!.Key!.sk!.S!);
      }
      return {};
    });
    const controller = new FaultController([{ kind: 'batch-write-unprocessed', at: 0 }], () => 0.5);
    const container: ContainerHandle = { id: 1, dead: false };
    instrumentClients(container, clients, { controller, config });
    return { clients, controller, container, applied };
  };

  it('the engine\'s batchWriteAll sends the handed-back half again: nothing left unsent', async () => {
    const { clients, controller, applied } = setUp();
    await batchWriteAll(clients.dynamodb, config.stateTable, deletes(6), undefined);
    expect(controller.injected.map((f) => f.kind)).toEqual(['batch-write-unprocessed']);
    expect(applied.sort()).toEqual(['d#0', 'd#1', 'd#2', 'd#3', 'd#4', 'd#5']);
    expect(controller.neverResent).toEqual([]);
    clients.destroy();
  });

  it('a caller that drops UnprocessedItems is reported (the check fails without the engine\'s resend)', async () => {
    const { clients, controller, applied } = setUp();
    const out = await clients.dynamodb.send(new BatchWriteItemCommand({ RequestItems: { [config.stateTable]: deletes(6) } }));
    expect(out.UnprocessedItems?.[config.stateTable]).toHaveLength(3);
    expect(applied).toEqual(['d#0', 'd#1', 'd#2']);
    expect(controller.neverResent).toHaveLength(3);
    expect(controller.neverResent[0]).toMatch(/handed back to container 1: delete q#p d#3/);
    clients.destroy();
  });

  it('a container that died before it could resend is excused (its retry died with it)', async () => {
    const { clients, controller, container } = setUp();
    await clients.dynamodb.send(new BatchWriteItemCommand({ RequestItems: { [config.stateTable]: deletes(4) } }));
    expect(controller.neverResent).toHaveLength(2);
    container.dead = true;
    expect(controller.neverResent).toEqual([]);
    clients.destroy();
  });
});

describe('instrumentClients: records past the trim horizon', () => {
  it('GetRecords leaves out the records up to its own shard\'s trim horizon only (Kinesis trims oldest-first)', async () => {
    const records = ['100', '101', '102', '103'].map((seq) => ({ SequenceNumber: seq, Data: new Uint8Array([1]), PartitionKey: 'k' }));
    const clients = stubbedClients((command, input) => {
      if (command === 'GetShardIteratorCommand') return { ShardIterator: `it-${String(input.StreamName)}-${String(input.ShardId)}` };
      if (command === 'GetRecordsCommand') return { Records: records, NextShardIterator: `${String(input.ShardIterator)}-next`, MillisBehindLatest: 0 };
      return {};
    });
    const expired = new ExpiredRecords();
    // One query's planned batch lost 101 on shard 0: 100, older, is gone too (for every query).
    expired.add('sales', 'shardId-000000000000', '101');
    instrumentClients({ id: 1, dead: false }, clients, { controller: new FaultController(), config, expired: expired.has });
    const read = async (stream: string, shardId = 'shardId-000000000000'): Promise<string[][]> => {
      const it = await clients.kinesis.send(new GetShardIteratorCommand({ StreamName: stream, ShardId: shardId, ShardIteratorType: 'TRIM_HORIZON' }));
      const first = await clients.kinesis.send(new GetRecordsCommand({ ShardIterator: it.ShardIterator! }));
      const second = await clients.kinesis.send(new GetRecordsCommand({ ShardIterator: first.NextShardIterator! }));
      return [first, second].map((p) => (p.Records ?? []).map((r) => r.SequenceNumber!));
    };
    // Followed across pages (the next iterator belongs to the same shard).
    expect(await read('sales')).toEqual([['102', '103'], ['102', '103']]);
    expect(await read('sales', 'shardId-000000000001')).toEqual([['100', '101', '102', '103'], ['100', '101', '102', '103']]);
    expect(await read('payments')).toEqual([['100', '101', '102', '103'], ['100', '101', '102', '103']]);
    clients.destroy();
  });
});

describe('ExpiredRecords: each shard\'s trim horizon', () => {
  it('expiring a record expires every older record of its shard, and the horizon never moves back', () => {
    const expired = new ExpiredRecords();
    expired.add('sales', 's0', '105');
    expired.add('sales', 's0', '102');
    expect(['100', '102', '105', '106'].map((seq) => expired.has('sales', 's0', seq))).toEqual([true, true, true, false]);
    expect(expired.has('sales', 's1', '100')).toBe(false);
    expect(expired.has('payments', 's0', '100')).toBe(false);
  });
});
