/**
 * How many sequential AWS round trips a warm container's invocation waits for, besides the sink's
 * writes: the recovery reads go out together, the watermark row rides in the commit transaction,
 * and the next trigger's decision reuses the invocation's watermark reading (bench/e2e-cost.bench.ts
 * measures the same at scale).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import type { KinesisStreamEvent } from 'aws-lambda';
import { createAwsClients } from '../../lib/aws/clients.js';
import { createKinesisTriggerHandler } from '../../lib/aws/kinesis-trigger-handler.js';
import { createQuietObservability } from '../../lib/aws/observability.js';
import { ensureTables } from '../../lib/aws/tables.js';
import { createStreamAndWait } from '../../lib/local/kinesis-admin.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { col, count, window } from '../../lib/plan/functions.js';
import { DEPLOYMENT_DEFAULTS, type RuntimeConfig } from '../../lib/runtime/runtime-config.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { AwsCallTrace, sequentialRoundTrips } from '../../bench/aws-call-trace.js';
import { deleteResources } from '../support/cleanup.js';

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

const SHARD = 'shardId-000000000000';

function event(first: number, n: number): KinesisStreamEvent {
  return {
    Records: Array.from({ length: n }, (_, i) => {
      const seq = `4968${String(first + i + 1).padStart(52, '0')}`;
      const user = `u${(first + i) % 7}`;
      const data = JSON.stringify({ user_id: user, ts: (1_714_521_600_000 + (first + i) * 1_000) / 1000 });
      return {
        eventID: `${SHARD}:${seq}`, eventSource: 'aws:kinesis', eventVersion: '1.0', eventName: 'aws:kinesis:record', awsRegion: 'us-east-1',
        invokeIdentityArn: 'arn:aws:iam::000000000000:role/t', eventSourceARN: 'arn:aws:kinesis:us-east-1:000000000000:stream/t',
        kinesis: { kinesisSchemaVersion: '1.0', partitionKey: user, sequenceNumber: seq, data: Buffer.from(data).toString('base64'), approximateArrivalTimestamp: Date.now() / 1000 },
      };
    }),
  };
}

describe('sequential round trips of a steady-state invocation', () => {
  it('update → DynamoDB: at most 6 besides the sink, and the result is right', async () => {
    const setup = createAwsClients(emulators.clientOptions);
    const trace = new AwsCallTrace();
    const clients = trace.attach(createAwsClients(emulators.clientOptions));
    const id = `${process.pid}-rt`;
    const config: RuntimeConfig = {
      ...DEPLOYMENT_DEFAULTS, checkpointTable: `rt-checkpoint-${id}`, stateTable: `rt-state-${id}`, sinkTable: `rt-sink-${id}`,
      sinkBucket: `rt-sink-${id}`, sinkPrefix: 'out/', deadLetterBucket: `rt-dlq-${id}`, streamName: `rt-stream-${id}`, expectedShardCount: 1,
    };
    try {
      await createStreamAndWait(setup.kinesis, config.streamName, 1);
      await ensureTables(setup.dynamodb, { checkpointTable: config.checkpointTable, stateTable: config.stateTable, sinkTable: config.sinkTable });
      await setup.s3.send(new CreateBucketCommand({ Bucket: config.deadLetterBucket }));
      const definition = defineQuery({
        name: 'round-trips', source: { schema: 'user_id string, ts timestamp', partitionKey: 'user_id' }, outputMode: 'update', sink: { kind: 'dynamodb' },
        transform: (df) => df.withWatermark('ts', '1 minute').groupBy(window(col('ts'), '5 minutes'), col('user_id')).agg(count().as('events')),
      });
      const handler = createKinesisTriggerHandler(definition, { config, clients, observability: createQuietObservability('round-trips') });
      const trips: number[] = [];
      for (let b = 0; b < 4; b++) {
        const from = trace.calls.length;
        expect((await handler(event(b * 20, 20))).batchItemFailures).toEqual([]);
        trips.push(sequentialRoundTrips(trace.since(from).filter((c) => !c.resources.includes(config.sinkTable!))));
      }
      // The first invocation also creates the query's metadata (cold). No window closes in these
      // 80 seconds of event time, so no invocation runs a no-data batch.
      expect(Math.max(...trips.slice(1))).toBeLessThanOrEqual(6);
      const rows = await scanDynamoDbSink(setup.dynamodb, config.sinkTable!);
      expect(rows.reduce((n, r) => n + Number(r.events), 0)).toBe(80);
    } finally {
      await deleteResources(setup, { streams: [config.streamName], tables: [config.checkpointTable, config.stateTable, config.sinkTable!], buckets: [config.deadLetterBucket] });
      setup.destroy();
      clients.destroy();
    }
  });
});
