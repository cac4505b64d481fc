/**
 * The chaos harness with a small number of runs: processes killed at every step of a batch,
 * throttling, duplicate deliveries and bisected retries must neither lose, duplicate nor change a
 * row of either sink (S3 files, DynamoDB upserts) nor a dead letter; and the fault-free emulator
 * run must give the in-memory engine's answer.
 */
import { describe, expect, it } from 'vitest';
import { runChaos, type ChaosReport } from '../../lib/local/chaos/run-chaos.js';
import { FAULT_KINDS } from '../../lib/local/chaos/faults.js';

// The SDK's notice about future Node versions is noise in the test output.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';

describe('chaos harness (emulators, real handler, injected faults)', () => {
  let report: ChaosReport;
  const lines: string[] = [];

  it('3 runs with faults: nothing lost, duplicated or mismatched', async () => {
    // A little less data than the CLI's default keeps the three runs near a minute on 2 cores.
    report = await runChaos({ seed: 11, runs: 3, hours: 3, stores: 5, print: (line) => lines.push(line) });
    expect(lines[lines.length - 1]).toBe('runs=3 lost=0 duplicated=0 mismatched=0');
    expect(lines.filter((l) => l.startsWith('runs='))).toHaveLength(1);
    expect(lines.filter((l) => /^run \d\/3: /.test(l))).toHaveLength(3);
    expect({ lost: report.lost, duplicated: report.duplicated, mismatched: report.mismatched }).toEqual({ lost: 0, duplicated: 0, mismatched: 0 });
    for (const run of report.runs) {
      expect(run.queries.map((q) => q.sink)).toEqual(['s3-files', 'dynamodb', 'dynamodb']);
      expect(run.queries[2]!.functions).toEqual(['chaos-per-product', 'chaos-per-product/stage-2']);
      for (const q of run.queries) expect(q.rows).toBeGreaterThan(0);
    }
  }, 150_000);

  it('actually injected the faults: every kind, processes killed, batches bisected and retried', () => {
    expect(report.faultsInjected).toBeGreaterThanOrEqual(3 * 2 * 10);
    for (const kind of FAULT_KINDS) expect(report.faultsByKind[kind] ?? 0, kind).toBeGreaterThan(0);
    const all = report.runs.flatMap((r) => r.queries);
    expect(all.reduce((n, q) => n + q.processesKilled, 0)).toBeGreaterThanOrEqual(3 * 2 * 6);
    expect(all.reduce((n, q) => n + q.stats.bisects, 0)).toBeGreaterThan(0);
    expect(all.reduce((n, q) => n + q.stats.retries, 0)).toBeGreaterThan(0);
  });

  it('the fault-free run gives the in-memory engine\'s final answer', () => {
    expect(report.memory.matches, report.memory.diff.examples.join('\n')).toBe(true);
    expect(report.memory.rows['chaos-archive']).toBeGreaterThan(0);
    expect(report.memory.rows['chaos-live']).toBeGreaterThan(0);
    expect(report.memory.rows['chaos-per-product']).toBeGreaterThan(0);
    expect(lines.some((l) => /in-memory engine vs fault-free emulator run: same final answer/.test(l))).toBe(true);
  });
});
