/**
 * A Kinesis event source mapping without the grant `KinesisEventSource` adds: that one calls the
 * stream's `grantRead` (ListStreams, SubscribeToShard, DescribeStreamConsumer included), while a
 * shared-throughput mapping needs only EVENT_SOURCE_READ_ACTIONS, which cdk/grants.ts grants.
 * The mapping keeps the construct id `KinesisEventSource` gives it, so an existing deployment's
 * mapping (and its position in the stream) is not replaced.
 */
import { Names } from 'aws-cdk-lib';
import type * as kinesis from 'aws-cdk-lib/aws-kinesis';
import type * as lambda from 'aws-cdk-lib/aws-lambda';

export function addKinesisEventSource(
  fn: lambda.Function, stream: kinesis.IStream, options: Omit<lambda.EventSourceMappingOptions, 'eventSourceArn'>,
): lambda.EventSourceMapping {
  return fn.addEventSourceMapping(`KinesisEventSource:${Names.nodeUniqueId(stream.node)}`, {
    ...options,
    eventSourceArn: stream.streamArn,
    supportS3OnFailureDestination: true,
  });
}
