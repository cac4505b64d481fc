/**
 * `sluice redrive` through a one-stage stateful query whose records sit on a shard that was split
 * (or merged) afterwards, on the emulators. The split's children were seeded from the parent's final state,
 * each with the keys hashing into its range; a re-driven record runs as a re-drive batch on the
 * open descendant whose range holds its partition key (lib/aws/redrive-routing.ts), so the sink
 * equals the in-memory answer over every record, each once: dead letters (split once; split twice
 * with the re-drive killed before its commit and finished by the live handler on a child that had
 * read nothing yet; a shard split while a re-drive batch waits on it) and skipped ranges
 * (`--skipped`, refused with exit 2 before).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReprocessReport } from '../../lib/aws/dead-letter-reprocess.js';
import type { QueryStatus } from '../../lib/aws/query-inspection.js';
import type { SkippedRedriveReport } from '../../lib/aws/skipped-batch-redrive.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { reshardStream } from '../../lib/local/kinesis-admin.js';
import { importQueryModule } from '../../lib/query/query-module.js';
import { crashingRecords, inGivenUp, putEach, recordsIn } from '../support/skipped-ranges.js';
import { answer, deployed, FIXED, killAfterPlanning, pendingRedrives, QUERY, sales, setUp } from '../support/stateful-redrive.js';

const PARENT = 'shardId-000000000000';
let emulators: EmulatorSet;
let dir: string;

beforeAll(async () => {
  emulators = await startEmulators();
  dir = mkdtempSync(join(tmpdir(), 'sluice-redrive-resharded-'));
});
afterAll(async () => {
  await emulators?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The producer's bug: amounts as strings, one sale per store (two hash into each half of the key space). */
const badSales = (from: number, base: number) => sales(4, from, (i) => String(base + 10 * i));

/** A deployment whose shard took eight good sales and the producer's bad ones (amounts from `base`), drained: the bad ones dead-lettered. */
async function withBadSalesDrained(base: number) {
  const setup = await setUp(emulators, dir, 1);
  const { deployment } = setup;
  const good = sales(8, 0);
  const bad = badSales(10, base);
  await setup.put([...good, ...bad]);
  await deployment.drain();
  return { setup, deployment, clients: deployment.clients, config: deployment.config, good, bad };
}

describe('sluice redrive through a one-stage stateful query after a split or a merge', () => {
  it('dead letters of the split parent run on the children holding their keys: the sink is the answer over every record', async () => {
    const { setup, deployment, clients, config, good, bad } = await withBadSalesDrained(100);
    const [children] = await reshardStream(clients.kinesis, config.streamName, [{ split: 'first-open' }], { timeoutMs: 60_000 });
    const more = sales(8, 20);
    await setup.put(more);
    await deployment.drain();
    expect(await setup.sink()).toEqual(answer([...good, ...more]));
    const inStream = await recordsIn(clients.kinesis, config.streamName);

    const first = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(first.code, first.stderr).toBe(0);
    const report = JSON.parse(first.stdout) as ReprocessReport;
    expect(report).toMatchObject({ reprocessed: 4, onDescendant: 4, ofClosedShard: 0, waiting: 0, failedAgain: [], lateRows: 0 });
    // One re-drive batch per child, on the child's own partition.
    expect(report.runs.map((r) => r.partitionId.split('@')[0]).sort()).toEqual([...children!].sort());
    expect(await setup.sink()).toEqual(answer([...good, ...bad, ...more]));
    expect(await recordsIn(clients.kinesis, config.streamName)).toBe(inStream);

    // The children read on from their own positions; a second re-drive finds nothing.
    const later = sales(4, 30);
    await setup.put(later);
    await deployment.drain({}, {}, await importQueryModule(FIXED));
    expect(await setup.sink()).toEqual(answer([...good, ...bad, ...more, ...later]));
    const again = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ reprocessed: 0, alreadyRedriven: 4, ofClosedShard: 0, runs: [] });
  }, 400_000);

  it('split twice, nothing read on the children yet, the re-drive killed before its commit: the live handler finishes it, each record once', async () => {
    const { setup, deployment, clients, config, good, bad } = await withBadSalesDrained(200);
    const fixed = await importQueryModule(FIXED);
    // The low half is split again: its keys go two levels down, the high half's one.
    await reshardStream(clients.kinesis, config.streamName, [{ split: 'first-open' }, { split: 'first-open' }], { timeoutMs: 60_000 });

    // The children are seeded by the re-drive itself; it plans its first batch at a child's start and dies.
    await killAfterPlanning(emulators, setup, fixed);
    const more = sales(8, 20);
    await setup.put(more);
    await deployment.drain({}, {}, fixed);
    expect(await pendingRedrives(setup)).toEqual([]);

    const resumed = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(resumed.code, resumed.stderr).toBe(0);
    const report = JSON.parse(resumed.stdout) as ReprocessReport;
    expect(report.failedAgain).toEqual([]);
    expect(report.runs.filter((r) => r.resumed)).toMatchObject([{ committedElsewhere: true }]);
    expect(report.runs.every((r) => r.partitionId.startsWith(PARENT))).toBe(false);
    expect(await setup.sink()).toEqual(answer([...good, ...bad, ...more]));
    await deployment.drain({}, {}, fixed);
    expect(await setup.sink()).toEqual(answer([...good, ...bad, ...more]));
    const again = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(JSON.parse(again.stdout)).toMatchObject({ reprocessed: 0, alreadyRedriven: 4, runs: [] });
  }, 400_000);

  it('a shard split while a re-drive batch is planned on it: its children wait for that batch, which the scheduled function commits first', async () => {
    const { setup, deployment, clients, config, good, bad } = await withBadSalesDrained(400);
    const fixed = await importQueryModule(FIXED);
    await killAfterPlanning(emulators, setup, fixed);
    // The batch holds no record of the shard: the split parent is not finished until it commits.
    await reshardStream(clients.kinesis, config.streamName, [{ split: 'first-open' }], { timeoutMs: 60_000 });
    await deployment.tick(Date.now(), 'tick', fixed);
    expect(await pendingRedrives(setup)).toEqual([]);
    const more = sales(8, 20);
    await setup.put(more);
    await deployment.drain({}, {}, fixed);
    expect(await setup.sink()).toEqual(answer([...good, ...bad, ...more]));
    const closing = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(closing.code, closing.stderr).toBe(0);
    expect(JSON.parse(closing.stdout)).toMatchObject({ reprocessed: 4, runs: [{ records: 4, resumed: true, committedElsewhere: true }] });
    expect(await setup.sink()).toEqual(answer([...good, ...bad, ...more]));
  }, 400_000);

  it('two shards merged: dead letters of both parents run on the merged child (seeded from both by the re-drive), once', async () => {
    const setup = await setUp(emulators, dir, 2);
    const { deployment } = setup;
    const { clients, config } = deployment;
    const good = sales(8, 0);
    // One bad sale per store: two stores hash into each parent's half of the key space.
    const bad = badSales(10, 600);
    await setup.put([...good, ...bad]);
    await deployment.drain();
    const letters = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--dry-run', '--json']);
    expect(JSON.parse(letters.stdout)).toMatchObject({ wouldRedrive: 4 });
    const [[merged]] = await reshardStream(clients.kinesis, config.streamName, [{ merge: 'first-adjacent' }], { timeoutMs: 60_000 });
    // The merged child has read nothing yet: the re-drive seeds it from both parents' final state first.
    const first = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(first.code, first.stderr).toBe(0);
    const report = JSON.parse(first.stdout) as ReprocessReport;
    expect(report).toMatchObject({ reprocessed: 4, onDescendant: 4, ofClosedShard: 0, waiting: 0, failedAgain: [], lateRows: 0 });
    expect(report.runs.map((r) => r.partitionId.split('@')[0])).toEqual([merged]);
    expect(await setup.sink()).toEqual(answer([...good, ...bad]));

    // The child reads on from its start after the re-drive batch; a second re-drive finds nothing.
    const more = sales(8, 20);
    await setup.put(more);
    await deployment.drain({}, {}, await importQueryModule(FIXED));
    expect(await setup.sink()).toEqual(answer([...good, ...bad, ...more]));
    const again = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ reprocessed: 0, alreadyRedriven: 4, ofClosedShard: 0, runs: [] });
  }, 400_000);

  it('skipped ranges of the split parent run through the query on its children (--skipped), once', async () => {
    const crash = crashingRecords();
    const setup = await setUp(emulators, dir, 1, crash.asFunction);
    const { deployment } = setup;
    const { clients, config } = deployment;
    const good = sales(8, 0);
    const crashing = sales(4, 10, (i) => 50 + i);
    await setup.put(good);
    // The parent's last records crash the function on every delivery: given up, recorded as skipped ranges.
    for (const placed of await putEach(clients.kinesis, config.streamName, crashing.map((s) => ({ data: JSON.stringify(s), partitionKey: s.store_id })))) {
      crash.crashing.add(placed.sequenceNumber);
    }
    await reshardStream(clients.kinesis, config.streamName, [{ split: 'first-open' }], { timeoutMs: 60_000 });
    const more = sales(8, 20);
    await setup.put(more);
    await deployment.drain({ batchSize: 10, ...crash.drainOptions(deployed, config, emulators) });
    expect([...crash.crashing].every((seq) => inGivenUp(crash.gaveUp, { shardId: PARENT, sequenceNumber: seq }))).toBe(true);
    expect(await setup.sink()).toEqual(answer([...good, ...more]));
    const ranges = (JSON.parse((await setup.cli(['status', QUERY, '--json'])).stdout) as QueryStatus).skippedRanges.length;
    expect(ranges).toBeGreaterThan(0);
    const inStream = await recordsIn(clients.kinesis, config.streamName);

    const redrive = await setup.cli(['redrive', QUERY, '--skipped', '--query-module', FIXED, '--json']);
    expect(redrive.code, redrive.stderr).toBe(0);
    const report = JSON.parse(redrive.stdout) as SkippedRedriveReport;
    expect(report).toMatchObject({ into: 'query', redriven: 4, deadLettered: 0, expired: 0 });
    expect(report.ranges.flatMap((r) => r.runs ?? []).every((run) => !run.partitionId.startsWith(PARENT))).toBe(true);
    expect(await setup.sink()).toEqual(answer([...good, ...crashing, ...more]));
    expect(await recordsIn(clients.kinesis, config.streamName)).toBe(inStream);

    const again = await setup.cli(['redrive', QUERY, '--skipped', '--query-module', FIXED, '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ redriven: 0, alreadyRedriven: ranges });
    const status = await setup.cli(['status', QUERY, '--json']);
    expect((JSON.parse(status.stdout) as QueryStatus).skippedRanges).toEqual([]);
    expect(await setup.sink()).toEqual(answer([...good, ...crashing, ...more]));
  }, 400_000);
});
