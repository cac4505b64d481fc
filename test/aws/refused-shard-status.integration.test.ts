/**
 * A shard the reshard guard refuses (RESHARD_WITH_STATE, RESHARD_STAGE_CHANGED) runs nothing while
 * the event source mapping retries it for hours. Before, only logs and a metric said so: `sluice
 * status` was healthy. Now the refusal is recorded in the checkpoint table (lib/aws/refused-shards.ts)
 * and status names the shard, the code, since when and the fix; a shard that later passes the
 * guard is no longer listed.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { inspectQuery, type QueryStatus } from '../../lib/aws/query-inspection.js';
import { RefusedShardStore } from '../../lib/aws/refused-shards.js';
import { CheckpointError } from '../../lib/errors/sluice-error.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { reshardStream } from '../../lib/local/kinesis-admin.js';
import { col } from '../../lib/plan/functions.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { deploy } from '../support/aws-pipeline.js';
import { distinctOrdersPerHour, orders, ordersPerHour } from '../support/orders-per-hour.js';
import { emulatorCliEnv, runSluice } from '../support/sluice-cli.js';

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });


const children = ['shardId-000000000001', 'shardId-000000000002'];
const statusOf = (d: Awaited<ReturnType<typeof deploy>>, name: string) => inspectQuery(d.clients, { ...d.config, sluiceQuery: name });

describe('sluice status names the shards the reshard guard refuses', () => {
  it('the scheduled drain refuses the split children of a one-stage state (RESHARD_STAGE_CHANGED): unhealthy, with shard, code and fix', async () => {
    const name = 'refused-layout';
    // Two internal streams in the new layout: the one-stage state cannot move into one stage 2.
    const d = await deploy(emulators, distinctOrdersPerHour(name), 1, { repartitionShards: 1, expectedShardCount: 2, hops: 2 });
    await d.put(orders(0, 6));
    await d.tick(Date.now(), 'drain', compileQuery(distinctOrdersPerHour(name), { expectedShardCount: 1 }) as never);
    expect((await statusOf(d, name)).refusedShards).toEqual([]);

    await reshardStream(d.clients.kinesis, d.config.streamName, [{ split: 'first-open' }]);
    await d.put(orders(6, 4));
    const before = Date.now();
    for (let i = 0; i < 3; i++) await d.tick(Date.now(), 'drain');

    const status = await statusOf(d, name);
    expect(status.healthy).toBe(false);
    expect(status.refusedShards.map((r) => [r.partitionId, r.code])).toEqual(children.map((c) => [c, 'RESHARD_STAGE_CHANGED']));
    for (const r of status.refusedShards) {
      expect(r.firstSeenMs).toBeGreaterThanOrEqual(before);
      // Three ticks, one write: a retry of the same refusal within the refresh interval writes nothing.
      expect(r.lastSeenMs).toBe(r.firstSeenMs);
      expect(r.hint).toMatch(/new query name/);
    }
    for (const child of children) {
      const line = status.problems.find((p) => p.includes(child));
      expect(line).toMatch(/RESHARD_STAGE_CHANGED/);
      expect(line).toMatch(/new query name/);
      expect(line).toMatch(/retention/);
    }

    // The command itself: exit code 1, the shard and code in the text, the records in --json.
    const dir = mkdtempSync(join(tmpdir(), 'sluice-refused-'));
    try {
      const descriptorFile = join(dir, 'deployment.json');
      writeFileSync(descriptorFile, JSON.stringify({ ...d.config, sluiceQuery: name }));
      const cli = (args: string[]) => runSluice([...args, '--deployment', descriptorFile,
        '--endpoint', `kinesis=${emulators.endpoints.kinesis}`, '--endpoint', `dynamodb=${emulators.endpoints.dynamodb}`,
        '--endpoint', `s3=${emulators.endpoints.s3}`], 60_000, emulatorCliEnv(emulators));
      const text = await cli(['status', name]);
      expect(text.code, text.stderr).toBe(1);
      expect(text.stdout).toMatch(/UNHEALTHY/);
      for (const child of children) expect(text.stdout).toMatch(new RegExp(`shard ${child} is refused \\(RESHARD_STAGE_CHANGED\\) since`));
      const json = await cli(['status', name, '--json']);
      expect(json.code).toBe(1);
      expect((JSON.parse(json.stdout) as QueryStatus).refusedShards.map((r) => r.code)).toEqual(['RESHARD_STAGE_CHANGED', 'RESHARD_STAGE_CHANGED']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);

  it('the event source mapping\'s handler refuses them too (RESHARD_STAGE_CHANGED): the children\'s stage 1 runs nothing, stage 2 keeps the count', async () => {
    const name = 'refused-layout-mapping';
    const d = await deploy(emulators, distinctOrdersPerHour(name), 1, { repartitionShards: 1, expectedShardCount: 2, hops: 2 });
    await d.put(orders(0, 6));
    await d.tick(Date.now(), 'drain', compileQuery(distinctOrdersPerHour(name), { expectedShardCount: 1 }) as never);

    await reshardStream(d.clients.kinesis, d.config.streamName, [{ split: 'first-open' }]);
    await d.put(orders(6, 4));
    await d.drain({ maximumRetryAttempts: 2, retryBackoffMs: 5 });

    expect(d.results.filter((r) => children.includes(r.shardId) && r.result.progress.length > 0)).toEqual([]);
    expect((await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!)).map((r) => Number(r.orders))).toEqual([6]);
    const status = await statusOf(d, name);
    expect(status.healthy).toBe(false);
    const refused = status.refusedShards.filter((r) => children.includes(r.partitionId));
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) expect(r.code).toBe('RESHARD_STAGE_CHANGED');
  }, 300_000);

  it('the event source mapping\'s handler refuses an indivisible state\'s children (RESHARD_WITH_STATE): unhealthy while it retries', async () => {
    const name = 'refused-with-state';
    // One shard, compiled for one: the count per hour runs in the source shard's partition.
    const d = await deploy(emulators, ordersPerHour(name), 1);
    await d.put(orders(0, 3));
    await d.drain();
    expect((await statusOf(d, name)).healthy).toBe(true);

    await reshardStream(d.clients.kinesis, d.config.streamName, [{ split: 'first-open' }]);
    await d.put(orders(3, 4));
    // A few retries stand for the hours until maxRecordAge.
    let childInvocations = 0;
    await d.drain({ maximumRetryAttempts: 2, retryBackoffMs: 5, hooks: { onInvocation: (e) => { if (children.includes(e.shardId)) childInvocations++; } } });

    const status = await statusOf(d, name);
    expect(status.healthy).toBe(false);
    const refused = status.refusedShards.filter((r) => children.includes(r.partitionId));
    expect(refused.length).toBeGreaterThan(0);
    // Every retry is refused again; the refusal is written once per shard (the refresh interval).
    expect(childInvocations).toBeGreaterThanOrEqual(3 * refused.length);
    for (const r of refused) {
      expect(r.lastSeenMs).toBe(r.firstSeenMs);
      expect(r.code).toBe('RESHARD_WITH_STATE');
      expect(status.problems.find((p) => p.includes(r.partitionId))).toMatch(/RESHARD_WITH_STATE.*repartition/s);
    }
  }, 300_000);

  it('a refused shard that later passes the guard is no longer listed', async () => {
    const name = 'refused-then-fixed';
    const stateless = defineQuery({
      name, source: { schema: 'order_id string, ts timestamp' }, transform: (df) => df.select(col('order_id')), outputMode: 'append', sink: { kind: 'dynamodb' },
    });
    const d = await deploy(emulators, stateless, 1);
    await d.put(orders(0, 2));
    await d.tick(Date.now(), 'drain');
    await reshardStream(d.clients.kinesis, d.config.streamName, [{ split: 'first-open' }]);
    // As an earlier deployment of the function left it: both children refused.
    const store = new RefusedShardStore({ client: d.clients.dynamodb, checkpointTable: d.config.checkpointTable, namespace: name });
    for (const child of children) await store.refused(child, child, new CheckpointError('refused before the fix', { code: 'RESHARD_STAGE_CHANGED', hint: 'h' }));
    expect((await statusOf(d, name)).healthy).toBe(false);

    await d.put(orders(2, 4));
    for (let i = 0; i < 2; i++) await d.tick(Date.now(), 'drain');
    const status = await statusOf(d, name);
    expect(status.refusedShards).toEqual([]);
    expect(status.healthy).toBe(true);
  }, 300_000);
});
