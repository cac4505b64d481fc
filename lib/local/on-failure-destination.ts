/**
 * The on-failure destination, locally: what Lambda sends to the SQS queue for a Kinesis batch it
 * gave up on (the record's shape as AWS documents it: requestContext, responseContext, timestamp,
 * KinesisBatchInfo; never the records themselves), delivered to the real on-failure handler as an
 * SQS event. The local event source mapping awaits it before it moves past the batch, as Lambda
 * does once the destination accepted the record.
 */
import { randomUUID } from 'node:crypto';
import type { SQSEvent } from 'aws-lambda';
import type { OnFailureHandler } from '../aws/on-failure-handler.js';
import type { BatchFailureInfo } from './event-source-mapping.js';

/** The body of the on-failure record Lambda sends for `info` (Lambda does not send the error message). */
export function onFailureRecordOf(info: BatchFailureInfo, functionArn = 'arn:aws:lambda:us-east-1:000000000000:function:local'): string {
  return JSON.stringify({
    requestContext: { requestId: randomUUID(), functionArn, condition: info.condition, approximateInvokeCount: info.approximateInvokeCount },
    responseContext: { statusCode: 200, executedVersion: '$LATEST', functionError: 'Unhandled' },
    version: '1.0',
    timestamp: new Date().toISOString(),
    KinesisBatchInfo: {
      shardId: info.shardId,
      startSequenceNumber: info.startSequenceNumber,
      endSequenceNumber: info.endSequenceNumber,
      approximateArrivalOfFirstRecord: info.approximateArrivalOfFirstRecord,
      approximateArrivalOfLastRecord: info.approximateArrivalOfLastRecord,
      batchSize: info.batchSize,
      streamArn: info.streamArn,
    },
  });
}

/** An SQS event of one message with `body`, as Lambda's SQS mapping delivers it. */
export function sqsEventOf(body: string, queueArn = 'arn:aws:sqs:us-east-1:000000000000:on-failure'): SQSEvent {
  return {
    Records: [{
      messageId: randomUUID(), receiptHandle: randomUUID(), body,
      attributes: {
        ApproximateReceiveCount: '1', SentTimestamp: String(Date.now()), SenderId: 'local', ApproximateFirstReceiveTimestamp: String(Date.now()),
      },
      messageAttributes: {}, md5OfBody: '', eventSource: 'aws:sqs', eventSourceARN: queueArn, awsRegion: 'us-east-1',
    }],
  };
}

/** Delivers a given-up batch to the on-failure handler; throws (the mapping retries) until it is recorded. */
export async function deliverToOnFailureHandler(handler: OnFailureHandler, info: BatchFailureInfo): Promise<void> {
  const answer = await handler(sqsEventOf(onFailureRecordOf(info)));
  if (answer.batchItemFailures.length > 0) throw new Error(`the on-failure handler did not record ${info.shardId} ${info.startSequenceNumber}..${info.endSequenceNumber}`);
}
