import { describe, expect, it } from 'vitest';
import { GetRecordsCommand, GetShardIteratorCommand, type KinesisClient } from '@aws-sdk/client-kinesis';
import { KinesisShardReader } from '../../lib/aws/kinesis-shard-reader.js';

/** A shard whose retention passed records 1 and 2: the stream refuses an iterator at them (the one fault injected). */
function trimmedShard(): KinesisClient {
  const held = [3, 4, 5].map((n) => ({ SequenceNumber: String(n), PartitionKey: 'p', Data: new Uint8Array() }));
  return {
    send: async (command: unknown) => {
      if (command instanceof GetShardIteratorCommand) {
        if (command.input.ShardIteratorType === 'AT_SEQUENCE_NUMBER' && BigInt(command.input.StartingSequenceNumber!) < 3n) {
          throw Object.assign(new Error('StartingSequenceNumber is past the trim horizon'), { name: 'InvalidArgumentException' });
        }
        return { ShardIterator: command.input.ShardIteratorType === 'TRIM_HORIZON' ? '3' : command.input.StartingSequenceNumber };
      }
      if (command instanceof GetRecordsCommand) {
        const from = BigInt(command.input.ShardIterator!);
        return { Records: held.filter((r) => BigInt(r.SequenceNumber) >= from), MillisBehindLatest: 0 };
      }
      throw new Error('unexpected command');
    },
  } as unknown as KinesisClient;
}

describe('KinesisShardReader.read over a trimmed start', () => {
  it('reads the records still held from the oldest when the stream refuses the first planned sequence number', async () => {
    const records = await new KinesisShardReader(trimmedShard(), 'stream').read('shardId-0', '1', '4');
    expect(records.map((r) => r.sequenceNumber)).toEqual(['3', '4']);
  });

  it('still reads from the planned first record when the stream holds it', async () => {
    const records = await new KinesisShardReader(trimmedShard(), 'stream').read('shardId-0', '4', '5');
    expect(records.map((r) => r.sequenceNumber)).toEqual(['4', '5']);
  });
});
