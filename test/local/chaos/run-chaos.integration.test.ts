/**
 * The chaos harness on the emulators, CI-sized (one start of the emulators, a fault-free run and
 * one run with faults, ~30 records): two of the three queries must show nothing lost, duplicated
 * or mismatched with every planned fault having happened; the third has bugs planted in that run
 * (its S3 files sink writes batch 1 a second time; a fault is planned where it can never happen)
 * and the harness must report each one. Bigger runs: `npm run chaos -- --large`.
 */
import { describe, expect, it } from 'vitest';
import { runChaos, type ChaosReport } from '../../../lib/local/chaos/run-chaos.js';
import type { Sink } from '../../../lib/sinks/sink.js';

// The SDK's notice about future Node versions is noise in the test output.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';

/**
 * The planted sink bug, in run 1's S3 files sink: the first batch with rows of each partition is
 * written again as batch id + 1000 (a batch the commit log never holds).
 */
const planted = new Set<string>();
const writesTwice = (sink: Sink, run: number): Sink => (run !== 1 || !sink.description.startsWith('S3FilesSink') ? sink : {
  description: sink.description,
  supportedOutputModes: sink.supportedOutputModes,
  // A method of the sink's class: a spread would leave it out and no batch would be revealed.
  onCommitted: (partitionId, batchId) => sink.onCommitted!(partitionId, batchId),
  addBatch: async (batch) => {
    await sink.addBatch(batch);
    if (batch.rows.length > 0 && (!planted.has(batch.partitionId) || planted.has(`${batch.partitionId}#${batch.batchId}`))) {
      planted.add(batch.partitionId);
      planted.add(`${batch.partitionId}#${batch.batchId}`);
      await sink.addBatch({ ...batch, batchId: batch.batchId + 1000 });
    }
  },
});

describe('chaos harness (emulators, real handlers, injected faults)', () => {
  let report: ChaosReport;
  const lines: string[] = [];

  it('a run with faults: nothing lost, duplicated or mismatched where no bug was planted; the planted bugs reported', async () => {
    report = await runChaos({
      // The queries of several stages (a chain, a join of two streams) are left out here to bound CI time: `npm run chaos` runs them.
      seed: 11, runs: 1, hours: 2, stores: 3, eventsPerStoreHour: 4, print: (line) => lines.push(line), stages: false,
      decorateSink: writesTwice,
      // A crash planned at an invocation that never comes.
      alterPlan: (_run, fn, plan) => (fn === 'chaos-archive' ? [...plan, { kind: 'crash-before-run', at: 1_000_000 }] : plan),
    });
    const run = report.runs[0]!;
    const [archive, live, perProduct] = run.queries;
    expect(run.queries.map((q) => q.sink)).toEqual(['s3-files', 'dynamodb', 'dynamodb']);
    expect(perProduct!.functions).toEqual(['chaos-per-product', 'chaos-per-product/stage-2', 'chaos-per-product/scheduled']);
    for (const q of [live!, perProduct!]) {
      expect({ ...q.diff, examples: [] }, `${q.query}\n${lines.join('\n')}`).toEqual({ lost: 0, duplicated: 0, mismatched: 0, examples: [] });
      expect(q.missed, q.query).toEqual([]);
      // Every throttle, 5xx and TransactionConflict sent again (in place where the engine retries in place,
      // unless its invocation ended by another error first: a kill of the process mid-upserts, another item's failure).
      expect(q.retries.broken, q.query).toEqual([]);
      expect(q.rows).toBeGreaterThan(0);
    }
    // The planted bugs: batch 1's rows twice in the archive, the history names the uncommitted
    // batch (id + 1000), the crash that never came fails the run (printed without --verbose).
    expect(archive!.diff.duplicated).toBeGreaterThan(0);
    expect(archive!.history.diff.mismatched).toBeGreaterThan(0);
    expect(archive!.history.diff.examples.join('\n')).toMatch(/manifest entry of uncommitted batch .*\/10\d\d/);
    expect(archive!.missed).toMatchObject([{ kind: 'crash-before-run', at: 1_000_000, fn: 'chaos-archive' }]);
    // How often the run met the point, beside the fault-free run's count the plan drew from.
    expect(archive!.missed[0]!.met).toBeGreaterThan(0);
    expect(archive!.missed[0]!.faultFree).toBeGreaterThan(0);
    expect(lines.some((l) => /chaos-archive: planned crash-before-run @1000000 never happened/.test(l))).toBe(true);
    expect(report.ok).toBe(false);
    expect(lines[lines.length - 1]).toMatch(/^runs=1 lost=\d+ duplicated=[1-9]\d* mismatched=[1-9]\d*$/);
  }, 900_000);

  it('the faults happened: every kind planned, kills, bisects, retries, poison dead-lettered', () => {
    const run1 = report.runs[0]!;
    expect(run1.missed).toBe(1); // the planted one only
    const kinds = new Set(run1.queries.flatMap((q) => q.injected.map((f) => f.kind)));
    for (const kind of ['kill-after-sink-write', 'kill-after-commit', 'throttle-dynamodb', 'ambiguous-write', 'transaction-conflict',
      'put-records-partial', 'zombie-wakes-late', 'clock-skew', 'timeout-mid-write', 's3-5xx', 'short-get-records', 'skipped-then-expired'] as const) {
      expect(kinds.has(kind), kind).toBe(true);
    }
    // Faults in the scheduled function too.
    expect(run1.queries.some((q) => q.injected.some((f) => f.fn.endsWith('/scheduled')))).toBe(true);
    expect(run1.queries.reduce((n, q) => n + q.processesKilled, 0)).toBeGreaterThan(0);
    expect(run1.queries.reduce((n, q) => n + q.stats.bisects, 0)).toBeGreaterThan(0);
    // Finite retries: the mapping gave up on the poison records, which reached the on-failure destination.
    for (const q of run1.queries.filter((x) => x.query !== 'chaos-per-product')) {
      expect(q.poison.deadLettered, q.query).toBe(q.poison.planned);
      // ...and the on-failure handler recorded each as a skipped range (what the reshard guard and `sluice redrive --skipped` read).
      expect(q.poison.recordedAsSkipped, q.query).toBe(q.poison.planned);
      expect(q.poison.planned).toBeGreaterThan(0);
      expect(q.stats.failedBatches).toBeGreaterThan(0);
    }
  });

  it('records that expired while skipped are lost visibly: status unhealthy before and after the re-drive, which reports them expired with their range', () => {
    const [, live, perProduct] = report.runs[0]!.queries;
    for (const q of [live!, perProduct!]) {
      // One outage per source function: its ranges expired, each reported (a failure of the report would show as lost above).
      expect(q.injected.filter((f) => f.kind === 'skipped-then-expired').length, q.query).toBeGreaterThan(0);
      expect(q.expired.ranges, q.query).toBeGreaterThan(0);
      // Every record counted lost was reported: by the re-drive, or by the engine for a planned batch (retention-loss.ts).
      expect(q.expired.reported + q.expired.recordedByEngine, q.query).toBeGreaterThanOrEqual(q.expired.lost);
    }
    expect(report.lostToRetention).toBeGreaterThan(0);
    expect(lines.some((l) => /^lost to retention, reported \(skipped-then-expired\): [1-9]\d* records never committed/.test(l))).toBe(true);
  });

  it('the fault-free run gives the in-memory engine\'s final answer (poison records left out)', () => {
    expect(report.memory.matches, report.memory.diff.examples.join('\n')).toBe(true);
    for (const q of ['chaos-archive', 'chaos-live', 'chaos-per-product']) expect(report.memory.rows[q]).toBeGreaterThan(0);
  });
});
