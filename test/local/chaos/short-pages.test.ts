/**
 * Short GetRecords pages (no emulators: a stub plays one shard and honours each request's Limit).
 * A reader call that meets a short page must read on from the page's next iterator until it has
 * what it was asked for; one that returns early is a broken defence and fails the chaos run.
 */
import { describe, expect, it } from 'vitest';
import { GetRecordsCommand, GetShardIteratorCommand } from '@aws-sdk/client-kinesis';
import { KinesisShardReader } from '../../../lib/aws/kinesis-shard-reader.js';
import { FaultController } from '../../../lib/local/chaos/faults.js';
import { instrumentClients } from '../../../lib/local/chaos/instrument.js';
import { withinReaderCall } from '../../../lib/local/chaos/short-pages.js';
import { localDeployment, localRuntimeConfig } from '../../../lib/local/dev/local-stack.js';
import type { AwsClients } from '../../../lib/aws/clients.js';
import { stubbedClients } from '../../support/stubbed-aws-clients.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';

const config = localRuntimeConfig(localDeployment('unit'), { shards: 1 });
const SEQUENCES = Array.from({ length: 10 }, (_, i) => String(100 + i));

/** One shard of ten records: an iterator is a position, a page holds up to Limit records. */
function oneShard(): AwsClients {
  return stubbedClients((command, input) => {
    if (command === 'GetShardIteratorCommand') {
      const at = SEQUENCES.indexOf(String(input.StartingSequenceNumber ?? ''));
      const type = String(input.ShardIteratorType);
      return { ShardIterator: `at-${type === 'TRIM_HORIZON' ? 0 : type === 'AFTER_SEQUENCE_NUMBER' ? at + 1 : at}` };
    }
    if (command === 'GetRecordsCommand') {
      const from = Number(String(input.ShardIterator).slice(3));
      const to = Math.min(SEQUENCES.length, from + Number(input.Limit ?? 10_000));
      const records = SEQUENCES.slice(from, to).map((seq) => ({ SequenceNumber: seq, Data: new Uint8Array([1]), PartitionKey: 'k' }));
      return { Records: records, NextShardIterator: `at-${to}`, MillisBehindLatest: to < SEQUENCES.length ? 1000 : 0 };
    }
    return {};
  });
}

/** A reader whose calls' first GetRecords page comes short (Limit 1 to 3). */
function withShortFirstPage(): { reader: KinesisShardReader; clients: AwsClients; controller: FaultController } {
  const clients = oneShard();
  const controller = new FaultController([{ kind: 'short-get-records', at: 0 }], () => 0.1);
  instrumentClients({ id: 1, dead: false, invocation: 1 }, clients, { controller, config });
  return { reader: new KinesisShardReader(clients.kinesis, 'sales'), clients, controller };
}

/** The paging a broken reader would do: the first page only. */
async function firstPageOnly(clients: AwsClients, from: string): Promise<string[]> {
  const it = await clients.kinesis.send(new GetShardIteratorCommand({ StreamName: 'sales', ShardId: 's0', ShardIteratorType: 'AT_SEQUENCE_NUMBER', StartingSequenceNumber: from }));
  const page = await clients.kinesis.send(new GetRecordsCommand({ ShardIterator: it.ShardIterator!, Limit: 10_000 }));
  return (page.Records ?? []).map((r) => r.SequenceNumber!);
}

describe('short GetRecords pages: the reader reads on', () => {
  it('a planned batch re-read across a short page returns all its records, and the check passes', async () => {
    const { reader, clients, controller } = withShortFirstPage();
    const records = await reader.read('s0', '101', '108');
    expect(controller.injected.map((f) => f.kind)).toEqual(['short-get-records']);
    expect(controller.retries.broken).toEqual([]);
    expect(records.map((r) => r.sequenceNumber)).toEqual(SEQUENCES.slice(1, 9));
    expect(controller.retries.figures()['short-get-records']).toMatchObject({ faults: 1, inPlace: 1 });
    clients.destroy();
  });

  it('a drain across a short page reads up to its limit, and the check passes', async () => {
    const { reader, clients, controller } = withShortFirstPage();
    const position = await reader.readAfter('s0', null, 6);
    expect(controller.retries.broken).toEqual([]);
    expect(position.records.map((r) => r.sequenceNumber)).toEqual(SEQUENCES.slice(0, 6));
    clients.destroy();
  });

  it('a read that returns after a short page without reading on is a broken defence', async () => {
    const { clients, controller } = withShortFirstPage();
    const records = await withinReaderCall('read s0 101..108', { until: 108n }, () => firstPageOnly(clients, '101'), (r) => r);
    expect(records.length).toBeLessThan(8);
    expect(controller.retries.broken).toEqual([
      expect.stringMatching(/^short-get-records @0 read s0 101\.\.108: a short page \(Limit \d for 10000, \d records\) ended the read with \d records/),
    ]);
    clients.destroy();
  });

  it('a short page that already holds the planned last record, or a limit already met, needs no more', async () => {
    const { clients, controller } = withShortFirstPage();
    await withinReaderCall('read s0 100..100', { until: 100n }, () => firstPageOnly(clients, '100'), (r) => r);
    expect(controller.retries.broken).toEqual([]);
    const limited = withShortFirstPage();
    await withinReaderCall('readAfter s0 limit 1', { limit: 1 }, () => firstPageOnly(limited.clients, '100'), (r) => r);
    expect(limited.controller.retries.broken).toEqual([]);
    clients.destroy();
    limited.clients.destroy();
  });
});
