/**
 * Optional X-Ray tracing (lib/aws/tracing.ts) in a Lambda-like environment: the X-Ray SDK sends
 * the closed subsegments over UDP to the daemon address, here a socket of this test, so what would
 * reach X-Ray is read back: the batch's subsegment with its annotations and the SDK call under it.
 */
import { createSocket, type Socket } from 'node:dgram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { TRACING_ENV } from '../../lib/runtime/runtime-config.js';

interface Doc { name: string; annotations?: Record<string, unknown>; subsegments?: Doc[]; namespace?: string; error?: boolean; fault?: boolean }

describe('tracing through Powertools Tracer', () => {
  let daemon: Socket;
  const received: Doc[] = [];

  beforeAll(async () => {
    daemon = createSocket('udp4');
    daemon.on('message', (message) => {
      // "{format header}\n{document}"
      const body = message.toString('utf8').split('\n').slice(1).join('\n');
      received.push(JSON.parse(body) as Doc);
    });
    await new Promise<void>((resolve) => daemon.bind(0, '127.0.0.1', () => resolve()));
    Object.assign(process.env, {
      [TRACING_ENV]: 'true',
      AWS_LAMBDA_FUNCTION_NAME: 'sluice-test', LAMBDA_TASK_ROOT: '/var/task', AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x', AWS_REGION: 'eu-west-1',
      AWS_XRAY_DAEMON_ADDRESS: `127.0.0.1:${daemon.address().port}`, AWS_XRAY_CONTEXT_MISSING: 'IGNORE_ERROR',
      _X_AMZN_TRACE_ID: 'Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1',
      AWS_ACCESS_KEY_ID: 'test', AWS_SECRET_ACCESS_KEY: 'test',
    });
  });

  afterAll(() => { daemon?.close(); });

  it('is off without SLUICE_TRACING: no tracer, the work just runs', async () => {
    const { tracingEnabled } = await import('../../lib/aws/tracing.js');
    expect(tracingEnabled({})).toBe(false);
    expect(tracingEnabled({ [TRACING_ENV]: 'true' })).toBe(true);
  });

  it('sends a subsegment per batch run, annotated with query, shard and stage, with the AWS calls beneath it', async () => {
    const { tracerForClients, inSubsegment } = await import('../../lib/aws/tracing.js');
    // A client whose endpoint refuses connections: the call fails fast, and is traced as it failed.
    const dynamodb = new DynamoDBClient({ endpoint: 'http://127.0.0.1:9', maxAttempts: 1 });
    const tracer = await tracerForClients({ dynamodb, kinesis: dynamodb as never, s3: dynamodb as never, destroy() {} });
    expect(tracer).toBeDefined();
    const result = await inSubsegment(tracer, 'sluice batch', { query: 'q', shard: 'shardId-000000000001', stage: 'single' }, async () => {
      await dynamodb.send(new ListTablesCommand({})).catch(() => undefined);
      return 42;
    });
    expect(result).toBe(42);
    await expect(inSubsegment(tracer, 'sluice batch', { query: 'q', shard: 's', stage: 'single' }, async () => { throw new Error('boom'); }))
      .rejects.toThrow('boom');
    for (let i = 0; i < 50 && received.filter((d) => d.name === 'sluice batch').length < 2; i++) await new Promise((r) => setTimeout(r, 20));

    const batches = received.filter((d) => d.name === 'sluice batch');
    expect(batches).toHaveLength(2);
    expect(batches[0]!.annotations).toEqual({ query: 'q', shard: 'shardId-000000000001', stage: 'single' });
    const calls = [...(batches[0]!.subsegments ?? []), ...received.filter((d) => d.namespace === 'aws')];
    expect(calls.some((c) => c.name === 'DynamoDB')).toBe(true);
    expect(batches[1]!.fault || batches[1]!.error).toBe(true);
  });
});
