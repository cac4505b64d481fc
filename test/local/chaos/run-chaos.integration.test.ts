/**
 * The chaos harness with a small number of runs: processes killed at every step of a batch,
 * throttling, duplicate deliveries and bisected retries must neither lose, duplicate nor change a
 * row of either sink (S3 files, DynamoDB upserts) nor a dead letter; and the fault-free emulator
 * run must give the in-memory engine's answer.
 */
import { describe, expect, it } from 'vitest';
import { runChaos, type ChaosReport } from '../../../lib/local/chaos/run-chaos.js';
import { FAULT_KINDS, FAULT_POINT, planFaults } from '../../../lib/local/chaos/faults.js';
import { compareRows } from '../../../lib/local/chaos/compare.js';
import { createPrng, generateSalesEvents } from '../../../lib/local/sample-events.js';

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

describe('chaos harness pieces (no emulators)', () => {
  const w = (h: number) => ({ start: `2024-05-01T${h}:00:00Z`, end: `2024-05-01T${h + 1}:00:00Z` });

  it('compares rows by key as multisets: lost, duplicated, mismatched, unexpected', () => {
    const want = [{ window: w(12), store_id: 'a', sales: 1 }, { window: w(12), store_id: 'b', sales: 2 }, { window: w(13), store_id: 'a', sales: 3 }];
    expect(compareRows(want, [...want].reverse(), ['window', 'store_id'])).toMatchObject({ lost: 0, duplicated: 0, mismatched: 0 });
    // Attribute order does not matter (DynamoDB returns its own).
    expect(compareRows(want, want.map((r) => ({ sales: r.sales, store_id: r.store_id, window: { end: r.window.end, start: r.window.start } })), ['window', 'store_id']))
      .toMatchObject({ lost: 0, duplicated: 0, mismatched: 0 });
    const got = [want[0]!, want[0]!, { ...want[1]!, sales: 5 }, { window: w(14), store_id: 'z', sales: 9 }];
    expect(compareRows(want, got, ['window', 'store_id'])).toMatchObject({ lost: 1, duplicated: 1, mismatched: 2 });
  });

  it('plans the same faults for the same seed: each kind whose point occurs, once, plus extras', () => {
    const counts = { 'sink-write': 9, 'state-version-write': 12, 'offset-write': 10, invocation: 8, response: 8, 'dynamodb-request': 200 };
    const a = planFaults(createPrng(5), counts, 2);
    expect(planFaults(createPrng(5), counts, 2)).toEqual(a);
    expect(planFaults(createPrng(6), counts, 2)).not.toEqual(a);
    const usable = FAULT_KINDS.filter((k) => (counts as Record<string, number>)[FAULT_POINT[k]]);
    for (const kind of usable) expect(a.some((f) => f.kind === kind), kind).toBe(true);
    expect(a).toHaveLength(usable.length + 2);
    for (const f of a) expect(f.at).toBeLessThan((counts as Record<string, number>)[FAULT_POINT[f.kind]]!);
    expect(new Set(a.map((f) => `${FAULT_POINT[f.kind]}#${f.at}`)).size).toBe(a.length);
  });

  it('generates the same events for a seed, never more than 10 minutes out of order before wave 2', () => {
    const events = generateSalesEvents({ seed: 42 });
    expect(generateSalesEvents({ seed: 42 })).toEqual(events);
    let newest = 0;
    for (const e of events.filter((r) => r.wave === 1 && r.kind === 'event')) {
      const ts = Date.parse((JSON.parse(e.data) as { ts: string }).ts);
      expect(newest - ts).toBeLessThanOrEqual(10 * 60_000);
      newest = Math.max(newest, ts);
    }
    expect(events.filter((r) => r.kind === 'malformed')).toHaveLength(2);
    expect(events.filter((r) => r.kind === 'late').every((r) => r.wave === 2)).toBe(true);
    // Amounts are quarters: sums are exact in any order.
    for (const e of events.filter((r) => r.kind !== 'malformed')) expect(((JSON.parse(e.data) as { amount: number }).amount * 4) % 1).toBe(0);
  });
});
