/**
 * What a re-drive through the query refuses before it touches anything: a query over several
 * streams (a dead letter's shard id does not name its stream), for dead letters and skipped
 * source ranges alike. (A one-stage stateful query is re-driven on the open shards holding its
 * records' keys: test/bin/redrive-resharded.integration.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import type { AwsClients } from '../../lib/aws/clients.js';
import { reprocessDeadLetters } from '../../lib/aws/dead-letter-reprocess.js';
import { redriveSkippedBatches } from '../../lib/aws/skipped-batch-redrive.js';
import type { DeploymentDescriptor, RuntimeConfig } from '../../lib/runtime/runtime-config.js';
import { joinThenWindowedSum } from '../support/chain-queries.js';

/** Any AWS call fails the test: the refusal comes first. */
const untouchable = new Proxy({}, { get: (_, name) => { throw new Error(`AWS touched: ${String(name)}`); } }) as AwsClients;
const config = {
  checkpointTable: 'c', stateTable: 's', streamName: 'x', deadLetterBucket: 'd', sinkTable: 't', sinkPrefix: '', idleShardTimeoutMs: 1, snapshotEveryBatches: 10,
} as unknown as RuntimeConfig;

describe('reprocessDeadLetters refuses', () => {
  it('a query over several streams', async () => {
    const definition = joinThenWindowedSum('q2');
    await expect(reprocessDeadLetters(untouchable, { ...config, sluiceQuery: 'q2' }, { definition, config }))
      .rejects.toThrow(/reads several streams/);
  });
});

describe('redriveSkippedBatches through the query refuses', () => {
  it('a query over several streams, before any AWS call (its records stay in their ranges)', async () => {
    const definition = joinThenWindowedSum('q2');
    const deployment: DeploymentDescriptor = { ...config, sluiceQuery: 'q2' };
    await expect(redriveSkippedBatches(untouchable, deployment, { throughQuery: { definition, config } })).rejects.toThrow(/reads several streams/);
  });
});
