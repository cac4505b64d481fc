/**
 * `sluice redrive <query> --query-module m` for a one-stage stateful query (no repartition stage:
 * its state lives in each source shard's own partition), on the emulators: the dead letters run as
 * a re-drive batch of the real shard's partition (lib/aws/redrive-batch.ts), inside the
 * exactly-once protocol. The sink equals the in-memory answer over every record, each counted
 * once; a re-drive killed after planning its batch is finished by the live handler, the scheduled
 * function or the next re-drive, once; the live handler racing the re-drive loses or wins a
 * conditional write and nothing is applied twice.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import type { QueryStatus } from '../../lib/aws/query-inspection.js';
import { reprocessDeadLetters, type ReprocessReport } from '../../lib/aws/dead-letter-reprocess.js';
import { runtimeConfigOf } from '../../lib/aws/replay.js';
import { importQueryModule } from '../../lib/query/query-module.js';
import { emulatorCliEnv, PROJECT_ROOT, runSluice } from '../support/sluice-cli.js';
import { recordsIn } from '../support/skipped-ranges.js';
import {
  answer, at, FIXED, hooked, isCommit, killAfterPlanning, pendingRedrives, plansRedrive, QUERY, sales, setUp as setUpOn, type Sale, type Setup,
} from '../support/stateful-redrive.js';

let emulators: EmulatorSet;
let dir: string;

beforeAll(async () => {
  emulators = await startEmulators();
  dir = mkdtempSync(join(tmpdir(), 'sluice-redrive-stateful-'));
});
afterAll(async () => {
  await emulators?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const setUp = (shards: number): Promise<Setup> => setUpOn(emulators, dir, shards);

describe('sluice redrive --query-module (a one-stage stateful query)', () => {
  it('re-drives dead letters as a batch of the shard\'s own partition: state carries on, late rows are reported, each record once', async () => {
    const setup = await setUp(2);
    const { deployment } = setup;
    const good = sales(16, 0);
    // The producer's bug: amounts as strings. Three on time; one behind the watermark once it is re-driven.
    const bad = sales(3, 20, (i) => String(100 * (i + 1)));
    const late: Sale = { store_id: 'north', amount: '1000', ts: at(-110) };
    await setup.put([...good.slice(0, 8), bad[0]!, late, ...good.slice(8), bad[1]!, bad[2]!]);
    await deployment.drain();
    expect(await setup.sink()).toEqual(answer(good));
    const inStream = await recordsIn(deployment.clients.kinesis, deployment.config.streamName);

    const first = await setup.cli(['redrive', QUERY, '--query-module', FIXED]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/re-drove 4 record\(s\)/);
    expect(first.stdout).toMatch(/batch \d+ of the shard's own partition/);
    expect(first.stdout).toMatch(/late rows \(behind the watermark, dropped as Spark drops late input\): 1$/m);
    // On-time re-driven sales join their groups' state; the late one is dropped, as Spark drops late input.
    expect(await setup.sink()).toEqual(answer([...good, ...bad]));
    expect(await recordsIn(deployment.clients.kinesis, deployment.config.streamName)).toBe(inStream);

    // The shard reads on from its real position after the re-drive batch: the next sales, each once.
    const more = sales(8, 40);
    await setup.put(more);
    await deployment.drain({}, {}, await importQueryModule(FIXED));
    expect(await setup.sink()).toEqual(answer([...good, ...bad, ...more]));

    const again = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ reprocessed: 0, alreadyRedriven: 4, ofClosedShard: 0, runs: [] });
    const status = await setup.cli(['status', QUERY, '--json']);
    expect(status.code, status.stdout).toBe(0);
    expect((JSON.parse(status.stdout) as QueryStatus).partitions.map((p) => p.partitionId).some((id) => id.includes('@redrive:'))).toBe(false);
  }, 400_000);

  it('a re-drive killed after planning its batch is finished once: by the live handler, by the scheduled function, by the next re-drive', async () => {
    const setup = await setUp(1);
    const { deployment } = setup;
    const fixed = await importQueryModule(FIXED);
    const good = sales(8, 0);
    await setup.put(good);
    await deployment.drain();
    // Three waves of the producer's bug, dead-lettered by the deployed query; each round re-drives one
    // (the latest not re-driven: --since its first arrival), then the fixed query is what runs.
    const waves: { since: number; bad: Sale[] }[] = [];
    for (let w = 0; w < 3; w++) {
      const since = Date.now();
      const bad = sales(2, 10 + 5 * w, (i) => String(100 * (w + 1) + i));
      await setup.put(bad);
      await deployment.drain();
      waves.push({ since, bad });
    }
    expect(await setup.sink()).toEqual(answer(good));
    const applied: Sale[] = [...good];

    const finishers: { name: string; finish: (since: string) => Promise<void> }[] = [
      { name: 'the live handler', finish: async () => {
        const next = sales(4, 30);
        applied.push(...next);
        await setup.put(next);
        await deployment.drain({}, {}, fixed);
      } },
      { name: 'the scheduled function', finish: async () => { await deployment.tick(Date.now(), 'tick', fixed); } },
      { name: 'the next re-drive', finish: async (since) => {
        const resumed = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--since', since, '--json']);
        expect(resumed.code, resumed.stderr).toBe(0);
        expect((JSON.parse(resumed.stdout) as ReprocessReport).runs).toMatchObject([{ records: 2, resumed: true, committedElsewhere: false }]);
      } },
    ];
    for (const [round, { name, finish }] of finishers.entries()) {
      const wave = waves[waves.length - 1 - round]!;
      const since = new Date(wave.since).toISOString();
      // Planned, its output written (idempotent by batch id), not committed: it must run again exactly so.
      await killAfterPlanning(emulators, setup, fixed, { sinceMs: wave.since }, 1, name);

      await finish(since);
      applied.push(...wave.bad);
      expect(await pendingRedrives(setup), name).toEqual([]);
      expect(await setup.sink(), name).toEqual(answer(applied));
      // The run is done: a re-drive closes it (or finds nothing), the next finds nothing, and the sink stays.
      const after = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--since', since, '--json']);
      expect(after.code, after.stderr).toBe(0);
      const report = JSON.parse(after.stdout) as ReprocessReport;
      expect(report.reprocessed, name).toBe(round === 2 ? 0 : 2);
      if (round < 2) expect(report.runs, name).toMatchObject([{ resumed: true, committedElsewhere: true, lateRows: null }]);
      const last = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--since', since, '--json']);
      expect(JSON.parse(last.stdout), name).toMatchObject({ reprocessed: 0, alreadyRedriven: 2 * (round + 1), runs: [] });
      await deployment.drain({}, {}, fixed);
      expect(await setup.sink(), name).toEqual(answer(applied));
    }
  }, 600_000);

  it('the live handler racing the re-drive: it runs the stored run before the plan, or the planned batch before the commit; each record once', async () => {
    const setup = await setUp(1);
    const { deployment } = setup;
    const fixed = await importQueryModule(FIXED);
    const good = sales(8, 0);
    await setup.put(good);
    await deployment.drain();
    const applied: Sale[] = [...good];
    let round = 0;
    const raceOnce = async (when: 'before-plan' | 'before-commit') => {
      const bad = sales(2, 10 + 5 * round, (i) => String(100 * (round + 1) + i));
      const live = sales(3, 30 + 5 * round);
      round++;
      await setup.put(bad);
      await deployment.drain();
      await setup.put(live);
      let raced = false;
      let plans = 0;
      // The live handler runs in the middle of the re-drive: before it plans (the handler plans the
      // same batch id first) or after it planned and before it commits (the handler runs its batch).
      const racing = hooked(emulators, async (items) => {
        if (plansRedrive(items)) plans++;
        const point = when === 'before-plan' ? plansRedrive(items) : isCommit(items);
        if (raced || !point) return;
        raced = true;
        await deployment.drain({}, {}, fixed);
      });
      const report = await reprocessDeadLetters(racing, setup.descriptor, { definition: fixed, config: runtimeConfigOf(setup.descriptor) });
      racing.destroy();
      expect(raced).toBe(true);
      // Before the plan: the run's records are stored, so the handler (its first look at the ledger in
      // its container) planned and committed the run itself; the re-drive's one plan was refused.
      // Before the commit: the handler ran the re-drive's planned batch. Either way it committed it.
      expect(plans).toBe(1);
      expect(report).toMatchObject({ reprocessed: 2, failedAgain: [] });
      expect(report.runs).toMatchObject([{ records: 2, committedElsewhere: true }]);
      applied.push(...bad, ...live);
      await deployment.drain({}, {}, fixed);
      expect(await setup.sink(), when).toEqual(answer(applied));
    };
    await raceOnce('before-plan');
    await raceOnce('before-commit');

    // And through the CLI process while the (fixed) handler drains new sales beside it.
    const bad = sales(2, 25, (i) => String(700 + i));
    await setup.put(bad);
    await deployment.drain();
    const live = sales(6, 45);
    await setup.put(live);
    const [cli] = await Promise.all([setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']), deployment.drain({}, {}, fixed)]);
    expect(cli.code, cli.stderr).toBe(0);
    expect(JSON.parse(cli.stdout)).toMatchObject({ reprocessed: 2, failedAgain: [] });
    applied.push(...bad, ...live);
    await deployment.drain({}, {}, fixed);
    expect(await setup.sink()).toEqual(answer(applied));
    const last = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(JSON.parse(last.stdout)).toMatchObject({ reprocessed: 0, alreadyRedriven: 6, failedAgain: [], runs: [] });
  }, 600_000);

  it('a re-drive resuming a run while the live handler commits it and reads on does not plan the run again', async () => {
    const setup = await setUp(1);
    const { deployment } = setup;
    const fixed = await importQueryModule(FIXED);
    const good = sales(8, 0);
    const bad = sales(2, 10, (i) => String(100 + i));
    await setup.put([...good, ...bad]);
    await deployment.drain();
    await killAfterPlanning(emulators, setup, fixed);

    // The resuming re-drive reads its run open twice (before storing, before running); right after
    // the second read, the live handler commits the run's batch and a batch of new sales after it.
    const live = sales(3, 30);
    await setup.put(live);
    let runReads = 0;
    const resuming = hooked(emulators, async () => {}, async (command) => {
      if (command instanceof GetItemCommand && command.input.Key?.sk?.S?.startsWith('run#') && ++runReads === 2) await deployment.drain({}, {}, fixed);
    });
    const report = await reprocessDeadLetters(resuming, setup.descriptor, { definition: fixed, config: runtimeConfigOf(setup.descriptor) });
    resuming.destroy();
    expect(runReads).toBeGreaterThanOrEqual(3);
    await deployment.drain({}, {}, fixed);
    expect(await setup.sink()).toEqual(answer([...good, ...bad, ...live]));
    // Its plan of the run again was refused (the run is done): the handler's commit was the only one.
    expect(report.runs).toMatchObject([{ records: 2, resumed: true, committedElsewhere: true }]);
  }, 400_000);

  it('a re-drive that died after storing its records and before planning their batch is planned and run once by the scheduled function', async () => {
    const setup = await setUp(1);
    const { deployment } = setup;
    const fixed = await importQueryModule(FIXED);
    const good = sales(8, 0);
    const bad = sales(2, 10, (i) => String(300 + i));
    await setup.put([...good, ...bad]);
    await deployment.drain();
    // The process dies at the plan: the run's records are in the ledger, no batch is planned.
    const dying = hooked(emulators, async (items) => {
      if (plansRedrive(items)) throw new Error('injected: the process died before planning');
    });
    await expect(reprocessDeadLetters(dying, setup.descriptor, { definition: fixed, config: runtimeConfigOf(setup.descriptor) })).rejects.toThrow(/before planning/);
    dying.destroy();
    expect(await pendingRedrives(setup)).toEqual([]);
    expect(await setup.sink()).toEqual(answer(good));

    await deployment.tick(Date.now(), 'tick', fixed);
    expect(await setup.sink()).toEqual(answer([...good, ...bad]));
    // Once: a second tick and the next re-drive (which closes the run) apply nothing more.
    await deployment.tick(Date.now(), 'tick', fixed);
    const closing = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(closing.code, closing.stderr).toBe(0);
    expect(JSON.parse(closing.stdout)).toMatchObject({ reprocessed: 2, runs: [{ records: 2, resumed: true, committedElsewhere: true }] });
    const last = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(JSON.parse(last.stdout)).toMatchObject({ reprocessed: 0, alreadyRedriven: 2, runs: [] });
    await deployment.drain({}, {}, fixed);
    expect(await setup.sink()).toEqual(answer([...good, ...bad]));
  }, 400_000);

  it('a query over several streams is refused before any AWS call, as a usage error that says what to do', async () => {
    const module = join(PROJECT_ROOT, 'test/bin/fixtures/redrive-two-streams.ts');
    const refused = await runSluice(['redrive', 'redrive-two-streams', '--query-module', module, '--deployment', join(dir, 'missing.json')], 60_000, emulatorCliEnv(emulators));
    expect(refused.code, refused.stderr).toBe(2);
    expect(refused.stderr).toMatch(/reads several streams/);
    expect(refused.stderr).toMatch(/send those records again from their producer/);
  }, 120_000);
});
