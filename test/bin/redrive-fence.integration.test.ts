/**
 * A stored re-drive run (a `sluice redrive` of a one-stage stateful query that died after storing
 * its records and before planning their batch) racing the reshard guard, on the emulators. The
 * guard finds the run's shard finished after a split and seeds the children from its final state;
 * a batch planned on the shard after that would land in a state nobody reads again, and its
 * records would vanish from the answer. Either order must apply the records once:
 *
 * - the seed first: the live handler, re-delivered a record of the closed shard, tries the run
 *   there; the plan's fence (the shard's watermark row is closed) refuses it, and the next re-drive
 *   runs it on the children holding its keys;
 * - the seed as `sluice redrive` plans the run (it found the shard open just before): the plan is
 *   refused by the same fence, and the re-drive moves the run to the children at once;
 * - the plan first (between the guard's look at the offset log and its mark): the guard reads the
 *   offset log again after the mark, so the children wait for that batch and the seed carries it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import type { KinesisStreamEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import { reprocessDeadLetters, type ReprocessReport } from '../../lib/aws/dead-letter-reprocess.js';
import { createKinesisTriggerHandler } from '../../lib/aws/kinesis-trigger-handler.js';
import { KinesisShardReader } from '../../lib/aws/kinesis-shard-reader.js';
import { createQuietObservability } from '../../lib/aws/observability.js';
import { runtimeConfigOf } from '../../lib/aws/replay.js';
import { createScheduledTriggerHandler } from '../../lib/aws/scheduled-trigger-handler.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { reshardStream } from '../../lib/local/kinesis-admin.js';
import { importQueryModule } from '../../lib/query/query-module.js';
import type { QueryDefinition } from '../../lib/query/query-definition.js';
import { answer, dyingBeforeCommit, FIXED, hooked, pendingRedrives, plansRedrive, QUERY, sales, setUp, type Setup } from '../support/stateful-redrive.js';

const PARENT = 'shardId-000000000000';
let emulators: EmulatorSet;
let dir: string;

beforeAll(async () => {
  emulators = await startEmulators();
  dir = mkdtempSync(join(tmpdir(), 'sluice-redrive-fence-'));
});
afterAll(async () => {
  await emulators?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Good sales, then one bad sale per store (two stores hash into each half of the key space), all drained by the deployed query. */
async function withDeadLetters(setup: Setup) {
  const good = sales(8, 0);
  const bad = sales(4, 10, (i) => String(500 + 10 * i));
  await setup.put([...good, ...bad]);
  await setup.deployment.drain();
  return { good, bad };
}

/** A re-drive through `fixed` that dies at its plan: the run is open, its records stored in the ledger, no batch planned. */
async function dieAtPlan(setup: Setup, fixed: QueryDefinition): Promise<void> {
  const dying = hooked(emulators, async (items) => {
    if (plansRedrive(items)) throw new Error('injected: the process died before planning');
  });
  await expect(reprocessDeadLetters(dying, setup.descriptor, { definition: fixed, config: runtimeConfigOf(setup.descriptor) })).rejects.toThrow(/before planning/);
  dying.destroy();
  expect(await pendingRedrives(setup)).toEqual([]);
}

/** The live handler (`fixed` deployed) invoked with the closed shard's first record again, as a mapping re-delivers it. */
async function redeliverParent(setup: Setup, fixed: QueryDefinition, clients?: AwsClients): Promise<void> {
  const { config } = setup.deployment;
  const first = (await new KinesisShardReader(setup.deployment.clients.kinesis, config.streamName).readAfter(PARENT, null, 1)).records[0]!;
  const handler = createKinesisTriggerHandler(fixed, {
    config, clientOptions: emulators.clientOptions, observability: createQuietObservability(QUERY), storedRedriveCheckMs: 0, ...(clients ? { clients } : {}),
  });
  const event: KinesisStreamEvent = {
    Records: [{
      kinesis: {
        kinesisSchemaVersion: '1.0', partitionKey: first.partitionKey, sequenceNumber: first.sequenceNumber, data: first.dataBase64,
        approximateArrivalTimestamp: first.approximateArrivalTimestampMs / 1000,
      },
      eventSource: 'aws:kinesis', eventVersion: '1.0', eventID: `${PARENT}:${first.sequenceNumber}`, eventName: 'aws:kinesis:record',
      invokeIdentityArn: 'arn:aws:iam::000000000000:role/sluice', awsRegion: 'us-east-1',
      eventSourceARN: `arn:aws:kinesis:us-east-1:000000000000:stream/${config.streamName}`,
    }],
  };
  await handler(event);
}

/** One scheduled drain with `fixed` deployed, on `clients` (default: the deployment's). */
async function scheduledDrain(setup: Setup, fixed: QueryDefinition, clients: AwsClients = setup.deployment.clients): Promise<unknown> {
  const handler = createScheduledTriggerHandler(fixed, { config: setup.deployment.config, clients, observability: createQuietObservability(QUERY) });
  return handler({ mode: 'drain' });
}

/** The emulators' clients, running `before` once, right before the reshard guard marks `partition`'s watermark row closed. */
function beforeMarkClosed(partition: string, before: () => Promise<void>): AwsClients {
  const clients = createAwsClients(emulators.clientOptions);
  const send = clients.dynamodb.send.bind(clients.dynamodb) as (c: unknown, ...r: unknown[]) => Promise<unknown>;
  let fired = false;
  const dynamodb = Object.assign(Object.create(clients.dynamodb) as AwsClients['dynamodb'], {
    send: async (command: unknown, ...rest: unknown[]) => {
      if (!fired && command instanceof UpdateItemCommand && command.input.UpdateExpression === 'SET closed = :true' && command.input.Key?.sk?.S === partition) {
        fired = true;
        await before();
      }
      return send(command, ...rest);
    },
  });
  return { kinesis: clients.kinesis, dynamodb, s3: clients.s3, destroy: () => clients.destroy() };
}

describe('a stored re-drive run racing the reshard guard of its shard', () => {
  it('the children seeded first: the live handler cannot plan it on the finished shard, and the next re-drive runs it on the children, once', async () => {
    const setup = await setUp(emulators, dir, 1);
    const { deployment } = setup;
    const { clients, config } = deployment;
    const fixed = await importQueryModule(FIXED);
    const { good, bad } = await withDeadLetters(setup);
    await dieAtPlan(setup, fixed);
    const [children] = await reshardStream(clients.kinesis, config.streamName, [{ split: 'first-open' }], { timeoutMs: 60_000 });
    const more = sales(8, 20);
    await setup.put(more);
    // The scheduled function finds the parent finished (it leaves the run alone) and seeds and runs the children.
    await scheduledDrain(setup, fixed);
    expect(await setup.sink()).toEqual(answer([...good, ...more]));

    // A re-delivery of the parent's records: the handler looks for stored runs of the parent.
    await redeliverParent(setup, fixed);
    const resumed = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(resumed.code, resumed.stderr + resumed.stdout).toBe(0);
    const report = JSON.parse(resumed.stdout) as ReprocessReport;
    expect(await setup.sink()).toEqual(answer([...good, ...bad, ...more]));
    expect(report).toMatchObject({ reprocessed: 4, failedAgain: [] });
    expect((report.runs[0] as { reroutedTo?: string[] }).reroutedTo?.map((p) => p.split('@')[0]).sort()).toEqual([...children!].sort());

    // Once: the children read on, another re-drive finds nothing.
    const later = sales(4, 40);
    await setup.put(later);
    await scheduledDrain(setup, fixed);
    const again = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ reprocessed: 0, alreadyRedriven: 4, runs: [] });
    expect(await setup.sink()).toEqual(answer([...good, ...bad, ...more, ...later]));
  }, 400_000);

  it('the batch planned first, as the guard marks the shard closed: the children wait for its commit and are seeded with it, once', async () => {
    const setup = await setUp(emulators, dir, 1);
    const { deployment } = setup;
    const { clients, config } = deployment;
    const fixed = await importQueryModule(FIXED);
    const { good, bad } = await withDeadLetters(setup);
    await dieAtPlan(setup, fixed);
    await reshardStream(clients.kinesis, config.streamName, [{ split: 'first-open' }], { timeoutMs: 60_000 });
    const more = sales(8, 20);
    await setup.put(more);
    // Right before the guard's mark, a live handler plans the run on the parent and dies before its commit.
    let raced = false;
    const racing = beforeMarkClosed(PARENT, async () => {
      const dying = dyingBeforeCommit(emulators);
      await redeliverParent(setup, fixed, dying);
      dying.destroy();
      raced = (await pendingRedrives(setup)).includes(PARENT);
    });
    await scheduledDrain(setup, fixed, racing);
    // The children may have waited this time; the next drain runs them with the parent's batch carried.
    await scheduledDrain(setup, fixed);
    racing.destroy();
    expect(raced).toBe(true);
    expect(await pendingRedrives(setup)).toEqual([]);
    expect(await setup.sink()).toEqual(answer([...good, ...bad, ...more]));

    // The re-drive closes the run the parent committed; the children read on; nothing twice.
    const closing = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(closing.code, closing.stderr + closing.stdout).toBe(0);
    expect(JSON.parse(closing.stdout)).toMatchObject({ reprocessed: 4, runs: [{ records: 4, committedElsewhere: true }] });
    const later = sales(4, 40);
    await setup.put(later);
    await scheduledDrain(setup, fixed);
    expect(await setup.sink()).toEqual(answer([...good, ...bad, ...more, ...later]));
  }, 400_000);

  it('the shard split and its children seeded as the re-drive plans its batch there: the plan is refused and the run moves to the children, once', async () => {
    const setup = await setUp(emulators, dir, 1);
    const { deployment } = setup;
    const { clients, config } = deployment;
    const fixed = await importQueryModule(FIXED);
    const { good, bad } = await withDeadLetters(setup);
    const more = sales(8, 20);
    let children: string[] = [];
    // The re-drive found the shard open; right before its plan, the stream is split and the scheduled function seeds the children.
    let raced = false;
    const racing = hooked(emulators, async (items) => {
      if (raced || !plansRedrive(items)) return;
      raced = true;
      [children] = await reshardStream(clients.kinesis, config.streamName, [{ split: 'first-open' }], { timeoutMs: 60_000 }) as [string[]];
      await setup.put(more);
      await scheduledDrain(setup, fixed);
    });
    const report = await reprocessDeadLetters(racing, setup.descriptor, { definition: fixed, config: runtimeConfigOf(setup.descriptor) });
    racing.destroy();
    expect(raced).toBe(true);
    expect(await setup.sink()).toEqual(answer([...good, ...bad, ...more]));
    expect(report).toMatchObject({ reprocessed: 4, failedAgain: [] });
    expect((report.runs[0] as { reroutedTo?: string[] }).reroutedTo?.map((p) => p.split('@')[0]).sort()).toEqual([...children].sort());
    expect(await pendingRedrives(setup)).toEqual([]);

    const later = sales(4, 40);
    await setup.put(later);
    await scheduledDrain(setup, fixed);
    const again = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ reprocessed: 0, alreadyRedriven: 4, runs: [] });
    expect(await setup.sink()).toEqual(answer([...good, ...bad, ...more, ...later]));
  }, 400_000);
});
