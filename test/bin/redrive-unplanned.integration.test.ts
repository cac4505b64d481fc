/**
 * A `sluice redrive` of a one-stage stateful query that died after storing its run's records in the
 * ledger and before planning their batch (lib/aws/redrive-batch.ts), on the emulators: the live
 * Kinesis handler plans and runs the run once, looking at the ledger at most once per interval
 * and shard (not at every invocation); and when the run's shard was split before its batch was
 * planned, the next re-drive runs the run's records on the open descendants holding their keys,
 * once, instead of stopping with the records claimed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { QueryCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reprocessDeadLetters, type ReprocessReport } from '../../lib/aws/dead-letter-reprocess.js';
import { runtimeConfigOf } from '../../lib/aws/replay.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { reshardStream } from '../../lib/local/kinesis-admin.js';
import { importQueryModule } from '../../lib/query/query-module.js';
import type { QueryDefinition } from '../../lib/query/query-definition.js';
import { answer, FIXED, hooked, pendingRedrives, plansRedrive, QUERY, sales, setUp, type Setup } from '../support/stateful-redrive.js';

const PARENT = 'shardId-000000000000';
let emulators: EmulatorSet;
let dir: string;

beforeAll(async () => {
  emulators = await startEmulators();
  dir = mkdtempSync(join(tmpdir(), 'sluice-redrive-unplanned-'));
});
afterAll(async () => {
  await emulators?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/**
 * A re-drive through `fixed` that dies before planning its batch: the run is open and its records
 * claimed; at the plan, its records are stored in the ledger too; before storing, they are not.
 */
async function dieAtPlan(setup: Setup, fixed: QueryDefinition, at: 'plan' | 'store' = 'plan'): Promise<void> {
  const dying = hooked(emulators, async (items) => {
    const stores = (items ?? []).some((i) => i.Put?.Item?.sk?.S?.startsWith('page#'));
    if (at === 'plan' ? plansRedrive(items) : stores) throw new Error('injected: the process died before planning');
  });
  await expect(reprocessDeadLetters(dying, setup.descriptor, { definition: fixed, config: runtimeConfigOf(setup.descriptor) })).rejects.toThrow(/before planning/);
  dying.destroy();
  expect(await pendingRedrives(setup)).toEqual([]);
}

/** Is this request the ledger's look for stored runs (DynamoDbRedriveLedger.storedRuns)? */
const looksForStoredRuns = (command: unknown): boolean => command instanceof QueryCommand
  && command.input.ExpressionAttributeValues?.[':pk']?.S === `${QUERY}#redrive`
  && (command.input.ExpressionAttributeValues[':p']?.S ?? '').startsWith('run#');

describe('a re-drive that died after storing its records and before planning their batch', () => {
  it('is planned and run once by the live Kinesis handler, which reads the ledger once per shard and interval', async () => {
    const setup = await setUp(emulators, dir, 1);
    const { deployment } = setup;
    const fixed = await importQueryModule(FIXED);
    const good = sales(8, 0);
    const bad = sales(2, 10, (i) => String(300 + i));
    await setup.put([...good, ...bad]);
    await deployment.drain();
    await dieAtPlan(setup, fixed);
    expect(await setup.sink()).toEqual(answer(good));

    // New sales through the live handler (the fixed query deployed), one record per invocation.
    const live = sales(4, 30);
    await setup.put(live);
    let looks = 0;
    const counting = hooked(emulators, async () => {}, async (command) => { if (looksForStoredRuns(command)) looks++; });
    await deployment.drain({ batchSize: 1 }, { clients: counting }, fixed);
    expect(await pendingRedrives(setup)).toEqual([]);
    expect(await setup.sink()).toEqual(answer([...good, ...bad, ...live]));
    // Four invocations of the shard in one container: the ledger was read at the first only.
    expect(looks).toBe(1);

    // A second container after the interval (0 here) looks again, finds the run done, and applies nothing more.
    const more = sales(2, 40);
    await setup.put(more);
    await deployment.drain({ batchSize: 1 }, { clients: counting, storedRedriveCheckMs: 0 }, fixed);
    counting.destroy();
    expect(looks).toBeGreaterThan(1);
    expect(await setup.sink()).toEqual(answer([...good, ...bad, ...live, ...more]));
    // The next re-drive closes the run the handler committed; the one after finds nothing.
    const closing = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(closing.code, closing.stderr).toBe(0);
    expect(JSON.parse(closing.stdout)).toMatchObject({ reprocessed: 2, runs: [{ records: 2, resumed: true, committedElsewhere: true }] });
    const last = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(JSON.parse(last.stdout)).toMatchObject({ reprocessed: 0, alreadyRedriven: 2, runs: [] });
    expect(await setup.sink()).toEqual(answer([...good, ...bad, ...live, ...more]));
  }, 400_000);

  it('its shard split before the batch was planned: the next re-drive runs its records on the children holding their keys, once', async () => {
    const setup = await setUp(emulators, dir, 1);
    const { deployment } = setup;
    const { clients, config } = deployment;
    const fixed = await importQueryModule(FIXED);
    const good = sales(8, 0);
    // One bad sale per store: two stores hash into each half of the key space.
    const bad = sales(4, 10, (i) => String(500 + 10 * i));
    await setup.put([...good, ...bad]);
    await deployment.drain();
    // Before storing its records: no live handler or scheduled function can plan the run on the shard.
    await dieAtPlan(setup, fixed, 'store');
    const [children] = await reshardStream(clients.kinesis, config.streamName, [{ split: 'first-open' }], { timeoutMs: 60_000 });
    const more = sales(8, 20);
    await setup.put(more);
    // The children run (seeded from the parent's final state); the parent is finished and runs nothing more.
    await deployment.drain();
    await deployment.tick(Date.now(), 'tick', fixed);
    expect(await setup.sink()).toEqual(answer([...good, ...more]));

    const resumed = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(resumed.code, resumed.stderr + resumed.stdout).toBe(0);
    const report = JSON.parse(resumed.stdout) as ReprocessReport;
    expect(report).toMatchObject({ reprocessed: 4, failedAgain: [] });
    // The parent's run went to one run per child, each a re-drive batch of the child's own partition.
    expect(report.runs).toMatchObject([{ partitionId: expect.stringMatching(new RegExp(`^${PARENT}@redrive:`)) as unknown, resumed: true }]);
    expect((report.runs[0] as { reroutedTo?: string[] }).reroutedTo?.map((p) => p.split('@')[0]).sort()).toEqual([...children!].sort());
    expect(await setup.sink()).toEqual(answer([...good, ...bad, ...more]));

    // Once: the children read on, a second re-drive finds nothing, and the sink stays the answer.
    const later = sales(4, 40);
    await setup.put(later);
    await deployment.drain({}, {}, fixed);
    await deployment.tick(Date.now(), 'tick', fixed);
    const again = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ reprocessed: 0, alreadyRedriven: 4, runs: [] });
    expect(await setup.sink()).toEqual(answer([...good, ...bad, ...more, ...later]));
  }, 400_000);
});
