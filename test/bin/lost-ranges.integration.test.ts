/**
 * Skipped ranges whose records left the stream before the re-drive read them, through the real CLI
 * on the emulators: `sluice redrive --skipped` counts as lost only the records no batch committed
 * (a batch whose response was lost on every retry committed them after all), and
 * `sluice redrive --acknowledge` / `--all-lost` records who saw a loss, when and why: `sluice
 * status` is healthy again and still lists the loss.
 *
 * Retention is simulated between the CLI and kinesis-mock by test/support/trimming-kinesis-proxy.ts.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { hourlySalesQuery } from '../../lib/local/dev/default-query.js';
import type { QueryStatus } from '../../lib/aws/query-inspection.js';
import type { SkippedRedriveReport } from '../../lib/aws/skipped-batch-redrive.js';
import { deploy } from '../support/aws-pipeline.js';
import { cliFor, committedAndGoneRanges } from '../support/skipped-ranges.js';
import { startTrimmingKinesisProxy, type TrimmingKinesisProxy } from '../support/trimming-kinesis-proxy.js';

const QUERY = 'lost-ranges';
let emulators: EmulatorSet;
let dir: string;
let proxy: TrimmingKinesisProxy | undefined;

beforeAll(async () => {
  emulators = await startEmulators();
  dir = mkdtempSync(join(tmpdir(), 'sluice-lost-ranges-'));
});
afterAll(async () => {
  await proxy?.close();
  await emulators?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('lost skipped ranges', () => {
  it('count only the records no batch committed as lost, and an acknowledged loss leaves status healthy and listed', async () => {
    const definition = hourlySalesQuery('update', QUERY);
    const deployment = await deploy(emulators, definition, 1);
    const { clients, config } = deployment;
    // Records 3..5 committed, their batch given up all the same; a range wholly past retention.
    const { seqs, gone } = await committedAndGoneRanges(deployment, definition, emulators);
    proxy = await startTrimmingKinesisProxy(emulators.endpoints.kinesis!);
    const cli = cliFor(emulators, config, QUERY, dir, { kinesis: proxy.endpoint });

    // Retention has passed records 3 and 4 of the committed range; record 5 is still held.
    proxy.trimBefore(seqs[5]!);
    const redrive = await cli(['redrive', QUERY, '--skipped', '--json']);
    expect(redrive.code, redrive.stderr).toBe(1);
    const report = JSON.parse(redrive.stdout) as SkippedRedriveReport;
    expect(report.ranges.map((r) => [r.first, r.outcome])).toEqual([
      [seqs[3], { redriven: 0, deadLettered: 0, alreadyCommitted: 3, expired: 0, skippedAgain: 0 }],
      [gone[0], { redriven: 0, deadLettered: 0, alreadyCommitted: 0, expired: 2, skippedAgain: 0, expiredRange: { first: gone[0], last: gone[1] } }],
    ]);

    const status = async (): Promise<{ code: number | null; status: QueryStatus }> => {
      const out = await cli(['status', QUERY, '--json']);
      return { code: out.code, status: JSON.parse(out.stdout) as QueryStatus };
    };
    const before = await status();
    expect(before.code).toBe(1);
    expect(before.status.lostRanges.map((r) => r.firstSequenceNumber)).toEqual([gone[0]]);
    expect(before.status.problems.filter((p) => /lost/.test(p))).toHaveLength(1);

    // Usage errors: no reason; a range that is not lost (the committed one); both forms at once.
    expect((await cli(['redrive', QUERY, '--acknowledge', gone[0]!])).code).toBe(2);
    const notLost = await cli(['redrive', QUERY, '--acknowledge', seqs[3]!, '--reason', 'x']);
    expect(notLost.code).toBe(2);
    expect(notLost.stderr).toContain(`shardId-000000000000#${gone[0]}`);
    expect((await cli(['redrive', QUERY, '--acknowledge', gone[0]!, '--all-lost', '--reason', 'x'])).code).toBe(2);
    expect((await status()).code).toBe(1);

    const ack = await cli(['redrive', QUERY, '--acknowledge', `shardId-000000000000#${gone[0]}`, '--reason', 'outage of 2024-05-01, producer re-sent', '--by', 'oncall', '--json']);
    expect(ack.code, ack.stderr).toBe(0);
    expect((JSON.parse(ack.stdout) as { acknowledged: unknown[] }).acknowledged).toHaveLength(1);
    const after = await status();
    expect(after.code).toBe(0);
    expect(after.status.healthy).toBe(true);
    expect(after.status.lostRanges).toMatchObject([{
      firstSequenceNumber: gone[0], outcome: { expired: 2 }, acknowledgement: { by: 'oncall', reason: 'outage of 2024-05-01, producer re-sent' },
    }]);
    const text = await cli(['status', QUERY]);
    expect(text.stdout).toMatch(/2 record\(s\) lost\); acknowledged by oncall at .*: outage of 2024-05-01/);
    // Once only: --all-lost finds nothing left, and the first acknowledgement stays.
    const all = await cli(['redrive', QUERY, '--all-lost', '--reason', 'again', '--json']);
    expect(all.code).toBe(0);
    expect(JSON.parse(all.stdout)).toMatchObject({ acknowledged: [], alreadyAcknowledged: [{ firstSequenceNumber: gone[0] }] });
    expect((await status()).status.lostRanges[0]!.acknowledgement!.reason).toBe('outage of 2024-05-01, producer re-sent');
  }, 300_000);
});
