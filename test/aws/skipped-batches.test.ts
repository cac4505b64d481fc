/**
 * The on-failure record Lambda sends for a Kinesis batch it gave up, as Sluice reads it, and which
 * stage (checkpoint partition) a skipped range belongs to.
 */
import { describe, expect, it } from 'vitest';
import { parseOnFailureRecord, skippedRangeHolding } from '../../lib/aws/skipped-batches.js';
import { stageOfStream } from '../../lib/aws/on-failure-handler.js';
import { onFailureRecordOf } from '../../lib/local/on-failure-destination.js';
import { compileForDeployment } from '../../lib/query/compiled-query.js';
import { hourlySalesPerProductQuery } from '../../lib/local/dev/default-query.js';
import type { RuntimeConfig } from '../../lib/runtime/runtime-config.js';
import type { BatchFailureInfo } from '../../lib/local/event-source-mapping.js';

/** The shape of AWS's documented example (Lambda developer guide, Kinesis on-failure destinations). */
const AWS_RECORD = JSON.stringify({
  requestContext: {
    requestId: 'c9b8fa9f-5a7f-xmpl-af9c-0c604cde93a5', functionArn: 'arn:aws:lambda:us-east-2:123456789012:function:myfunction',
    condition: 'RetryAttemptsExhausted', approximateInvokeCount: 1,
  },
  responseContext: { statusCode: 200, executedVersion: '$LATEST', functionError: 'Unhandled' },
  version: '1.0',
  timestamp: '2019-11-14T00:38:06.021Z',
  KinesisBatchInfo: {
    shardId: 'shardId-000000000001',
    startSequenceNumber: '49601189658422359378836298521827638475320189012309704722',
    endSequenceNumber: '49601189658422359378836298522902373528957594348623495186',
    approximateArrivalOfFirstRecord: '2019-11-14T00:38:04.835Z',
    approximateArrivalOfLastRecord: '2019-11-14T00:38:05.580Z',
    batchSize: 500,
    streamArn: 'arn:aws:kinesis:us-east-2:123456789012:stream/mystream',
  },
});

describe('parseOnFailureRecord', () => {
  it('reads the shard, stream, sequence range, size, condition and time of AWS\'s on-failure record', () => {
    expect(parseOnFailureRecord(AWS_RECORD)).toEqual({
      shardId: 'shardId-000000000001',
      streamArn: 'arn:aws:kinesis:us-east-2:123456789012:stream/mystream',
      startSequenceNumber: '49601189658422359378836298521827638475320189012309704722',
      endSequenceNumber: '49601189658422359378836298522902373528957594348623495186',
      batchSize: 500,
      reason: 'RetryAttemptsExhausted: function error Unhandled',
      skippedAtMs: Date.parse('2019-11-14T00:38:06.021Z'),
      approximateArrivalOfFirstRecordMs: Date.parse('2019-11-14T00:38:04.835Z'),
    });
  });

  it('refuses what is not a Kinesis on-failure record, saying so', () => {
    expect(() => parseOnFailureRecord('{"store_id":')).toThrow(/not an on-failure record \(not JSON\)/);
    expect(() => parseOnFailureRecord(JSON.stringify({ requestContext: { condition: 'RetryAttemptsExhausted' } }))).toThrow(/no KinesisBatchInfo/);
    const badRange = JSON.parse(AWS_RECORD) as { KinesisBatchInfo: Record<string, unknown> };
    badRange.KinesisBatchInfo.endSequenceNumber = 'latest';
    expect(() => parseOnFailureRecord(JSON.stringify(badRange))).toThrow(/sequence range/);
  });

  it('reads back what the local event source mapping sends for a batch it gave up', () => {
    const info = {
      condition: 'RetryAttemptsExhausted', reason: 'Runtime exited', shardId: 'shardId-000000000000', streamArn: 'arn:aws:kinesis:us-east-1:000000000000:stream/s',
      startSequenceNumber: '100', endSequenceNumber: '250', batchSize: 3, approximateArrivalOfFirstRecord: '2026-01-01T00:00:00.000Z',
      approximateArrivalOfLastRecord: '2026-01-01T00:00:01.000Z', approximateInvokeCount: 5, records: [],
    } satisfies BatchFailureInfo;
    expect(parseOnFailureRecord(onFailureRecordOf(info))).toMatchObject({
      shardId: info.shardId, streamArn: info.streamArn, startSequenceNumber: '100', endSequenceNumber: '250', batchSize: 3, reason: 'RetryAttemptsExhausted: function error Unhandled',
    });
  });
});

describe('skippedRangeHolding', () => {
  const ranges = [{ firstSequenceNumber: '100', lastSequenceNumber: '200' }, { firstSequenceNumber: '49601189658422359378836298521827638475320189012309704722', lastSequenceNumber: '49601189658422359378836298521827638475320189012309704722' }];
  it('finds the range holding a sequence number, ends included, compared as numbers', () => {
    expect(skippedRangeHolding(ranges, '100')).toBe(ranges[0]);
    expect(skippedRangeHolding(ranges, '200')).toBe(ranges[0]);
    expect(skippedRangeHolding(ranges, '99')).toBeUndefined();
    expect(skippedRangeHolding(ranges, '1000')).toBeUndefined();
    expect(skippedRangeHolding(ranges, '49601189658422359378836298521827638475320189012309704722')).toBe(ranges[1]);
    expect(skippedRangeHolding(ranges, '49601189658422359378836298521827638475320189012309704723')).toBeUndefined();
  });
});

describe('stageOfStream', () => {
  it('puts a source stream\'s skipped range on stage 1\'s partition and an internal stream\'s on stage 2\'s', () => {
    const config: RuntimeConfig = {
      checkpointTable: 'cp', stateTable: 'st', sinkTable: 'sink', sinkPrefix: '', deadLetterBucket: 'dl', deadLetterPrefix: 'dead-letter/',
      streamName: 'sales', repartitionStreamName: 'sales-internal', idleShardTimeoutMs: 0, expectedShardCount: 2, snapshotEveryBatches: 3,
    };
    const query = compileForDeployment(hourlySalesPerProductQuery('per-product'), config);
    expect(stageOfStream(query, config, 'sales')?.checkpointPartition('shardId-000000000001')).toBe('shardId-000000000001');
    expect(stageOfStream(query, config, 'sales-internal')?.checkpointPartition('shardId-000000000001')).toBe('state.shardId-000000000001');
    expect(stageOfStream(query, config, 'someone-elses-stream')).toBeUndefined();
  });
});
