/**
 * The chaos harness's retention timeline (lib/local/chaos/retention-timeline.ts) and the oracle's
 * kept-records contract (retention-loss.ts keptOrLost): which records are at risk, which are the
 * backlog a trim may strike at once, and that a trimmed planned batch neither kept nor recorded
 * lost, or both, fails the run. A deferred trim that never comes is a missed fault (faults.ts).
 */
import { describe, expect, it } from 'vitest';
import type { KinesisStreamEvent } from 'aws-lambda';
import { atRisk, Backlog, BACKLOG_AGE_MS, FUNCTION_TIMEOUT_MS, KEEP_MARGIN_MS, RETENTION_MS, STREAM_RETENTION_HOURS } from '../../../lib/local/chaos/retention-timeline.js';
import { keptOrLost, plannedRangeTrimmed } from '../../../lib/local/chaos/retention-loss.js';
import { FaultController } from '../../../lib/local/chaos/faults.js';

const NOW = Date.parse('2026-12-05T12:00:00Z');

describe('retention timeline', () => {
  it('a record is at risk when it leaves the stream before the deadline plus the margin, as the engine decides', () => {
    const edge = NOW + FUNCTION_TIMEOUT_MS + KEEP_MARGIN_MS - RETENTION_MS;
    expect(atRisk(edge, NOW)).toBe(true);
    expect(atRisk(edge + 1, NOW)).toBe(false);
    // Put during the run: not at risk; a backlog record: at risk, and still in the stream.
    expect(atRisk(NOW, NOW)).toBe(false);
    expect(atRisk(NOW - BACKLOG_AGE_MS, NOW)).toBe(true);
    expect(NOW - BACKLOG_AGE_MS + RETENTION_MS).toBeGreaterThan(NOW + 5 * 60_000);
    expect(STREAM_RETENTION_HOURS).toBe(0.5);
  });

  it('the backlog is the oldest half of each shard (Kinesis trims oldest-first), seen with its earlier arrival by every reader', () => {
    const placed = [
      { shardId: 's0', sequenceNumber: '30' }, { shardId: 's0', sequenceNumber: '10' }, { shardId: 's0', sequenceNumber: '20' },
      { shardId: 's1', sequenceNumber: '5' }, { shardId: 's1', sequenceNumber: '7' },
    ];
    const backlog = new Backlog().mark('st', placed);
    expect(['10', '20', '30'].map((s) => backlog.has('st', 's0', s))).toEqual([true, true, false]);
    expect(['5', '7'].map((s) => backlog.has('st', 's1', s))).toEqual([true, false]);
    expect(backlog.has('other', 's0', '10')).toBe(false);
    expect(backlog.arrivalMs('st', 's0', '10', NOW)).toBe(NOW - BACKLOG_AGE_MS);
    expect(backlog.arrivalMs('st', 's0', '30', NOW)).toBe(NOW);
    const record = (seq: string): KinesisStreamEvent['Records'][number] => ({
      eventID: `s0:${seq}`, kinesis: { sequenceNumber: seq, approximateArrivalTimestamp: NOW / 1000, data: '', partitionKey: 'k', kinesisSchemaVersion: '1.0' },
    }) as KinesisStreamEvent['Records'][number];
    const event = { Records: [record('20'), record('30')] };
    const aged = backlog.agedEvent('st', event);
    expect(aged.Records.map((r) => r.kinesis.approximateArrivalTimestamp * 1000)).toEqual([NOW - BACKLOG_AGE_MS, NOW]);
    // The mapping's own event is left as it was (it redelivers it).
    expect(event.Records[0]!.kinesis.approximateArrivalTimestamp).toBe(NOW / 1000);
  });
});

describe('kept or lost (the oracle)', () => {
  it('passes a trimmed batch that was kept, or that recorded its loss', () => {
    const diff = keptOrLost({ trimmed: ['p#1', 'p#2'], kept: new Set(['p#1']), lossy: new Set(['p#2']) });
    expect(diff).toEqual({ lost: 0, duplicated: 0, mismatched: 0, examples: [] });
  });

  it('fails a trimmed batch neither kept nor recorded lost, and a loss recorded beside a kept copy', () => {
    const diff = keptOrLost({ trimmed: ['p#1', 'p#1', 'q#4'], kept: new Set(['q#4', 'r#2']), lossy: new Set(['r#2']) });
    expect(diff.lost).toBe(1);
    expect(diff.mismatched).toBe(1);
    expect(diff.examples.join('\n')).toMatch(/p#1 lost records to a trim, and neither kept/);
    expect(diff.examples.join('\n')).toMatch(/r#2 recorded a loss to retention although it had a kept copy/);
  });
});

describe('a deferred trim (FaultController.hold)', () => {
  it('is missed until confirmed, then happened with what it did', () => {
    const controller = new FaultController([{ kind: 'planned-then-expired', at: 0 }]);
    const fault = controller.hit('offset-write', () => 'pk offset#1')!;
    controller.hold(fault);
    expect(controller.injected).toEqual([]);
    expect(controller.missed).toEqual([{ kind: 'planned-then-expired', at: 0 }]);
    controller.confirm(fault, 'a retry ran it');
    expect(controller.missed).toEqual([]);
    expect(controller.injected).toEqual([{ kind: 'planned-then-expired', at: 0, detail: 'pk offset#1; a retry ran it' }]);
  });
});

describe('which planned batch a trim struck (plannedRangeTrimmed)', () => {
  // Seed 1 with --expire-planned: the fault trimmed its event's first records, which an earlier
  // batch had committed; the oracle blamed the planned batch for keeping nothing and losing nothing.
  const horizon = 105n;
  const expired = (seq: string): boolean => BigInt(seq) <= horizon;
  const at = (first: string, last: string) => ({ shardId: 's-1', sequenceNumber: last, firstSequenceNumber: first, recordCount: 2 });

  it('a batch whose first planned record left the stream is struck', () => {
    expect(plannedRangeTrimmed({ sales: at('104', '107') }, { sales: at('101', '103') }, expired)).toBe(true);
    expect(plannedRangeTrimmed({ sales: at('101', '103') }, null, expired)).toBe(true);
  });

  it('a batch planned after the trimmed records, a no-data batch (the previous plan\'s offsets) and a re-drive batch are not', () => {
    expect(plannedRangeTrimmed({ sales: at('106', '109') }, { sales: at('101', '105') }, expired)).toBe(false);
    expect(plannedRangeTrimmed({ sales: at('101', '105') }, { sales: at('101', '105') }, expired)).toBe(false);
    expect(plannedRangeTrimmed({ sales: { ...at('101', '105'), redrive: { run: 'r1' } } }, { sales: at('101', '105') }, expired)).toBe(false);
    expect(plannedRangeTrimmed({ sales: null }, null, expired)).toBe(false);
  });

  it('a stage 2 with several hop inputs is struck when any input\'s range is', () => {
    expect(plannedRangeTrimmed({ a: at('101', '103'), b: at('104', '106') }, { a: at('101', '103'), b: null }, expired)).toBe(true);
  });
});
