/**
 * `sluice replay start` without `--query-module` tells the sink's kind from the deployment alone:
 * a DynamoDB sink that spills large values to S3 has a bucket as well as a table, and is still a
 * DynamoDB sink (its replay needs a table of its own; it gets no S3 prefix). On the emulators, as
 * the CLI's `replay start` calls it.
 */
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { startReplay, writesDynamoDbSink } from '../../lib/aws/replay.js';
import { hourlySalesQuery } from '../../lib/local/dev/default-query.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import type { DeploymentDescriptor } from '../../lib/runtime/runtime-config.js';
import { readNamespacePointer } from '../../lib/aws/query-namespace.js';
import { deploy } from '../support/aws-pipeline.js';
import { deleteResources } from '../support/cleanup.js';

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); }, 120_000);
afterAll(async () => { await emulators?.stop(); });

describe('replay start of a deployed query, without its module', () => {
  it('a spilling DynamoDB-sink query (bucket and table) needs --sink-table and replays into that table, not an S3 prefix', async () => {
    const base = hourlySalesQuery('update', 'replay-spill-kind');
    const spilling = defineQuery({ ...base, sink: { kind: 'dynamodb', onUnwritableRow: 'spill' } });
    const d = await deploy(emulators, spilling, 1);
    const deployment: DeploymentDescriptor = { ...d.config, sluiceQuery: spilling.name };
    expect(deployment.sinkBucket && deployment.sinkTable).toBeTruthy();
    expect(writesDynamoDbSink(deployment, undefined)).toBe(true);
    // An S3 sink's deployment names a bucket and no table.
    expect(writesDynamoDbSink({ ...deployment, sinkTable: undefined }, undefined)).toBe(false);

    const fromMs = Date.now() - 60_000;
    await expect(startReplay(d.clients, deployment, { fromMs })).rejects.toMatchObject({ code: 'REPLAY_NEEDS_SINK_TABLE' });
    expect((await readNamespacePointer(d.clients.dynamodb, deployment.checkpointTable, spilling.name)).shadow ?? null).toBeNull();

    const shadowTable = `${deployment.sinkTable}-replay`;
    onTestFinished(() => deleteResources(d.clients, { tables: [shadowTable] }));
    const run = await startReplay(d.clients, deployment, { fromMs, sinkTable: shadowTable });
    expect(run).toMatchObject({ sinkTable: shadowTable, drivenBy: 'scheduled-function' });
    expect(run.sinkPrefix).toBeUndefined();
    expect((await readNamespacePointer(d.clients.dynamodb, deployment.checkpointTable, spilling.name)).shadow).toMatchObject({ sinkTable: shadowTable });
  }, 120_000);
});
