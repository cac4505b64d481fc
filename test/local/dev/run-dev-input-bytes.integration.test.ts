/**
 * `sluice dev --input` on a file a real producer could have: a byte-order mark, a line that is
 * not UTF-8, CR LF line ends, and a record over Kinesis's 1 MiB limit. The run finishes with its
 * summary; the invalid line is a dead letter with its bytes unchanged; the first line keeps its
 * partition key; the oversized line is reported and skipped.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runDev, type DevSummary } from '../../../lib/local/dev/run-dev.js';

const sale = (store: string, minute: number): string => JSON.stringify({ store_id: store, amount: 2, ts: `2024-05-01T12:${String(minute).padStart(2, '0')}:00Z` });
const NOT_UTF8 = Buffer.from([0x7b, 0x22, 0x73, 0x74, 0x6f, 0x72, 0x65, 0x5f, 0x69, 0x64, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0x22, 0x7d]); // {"store_id":"\xc3("}
const OVERSIZED = JSON.stringify({ store_id: 'east', amount: 1, ts: '2024-05-01T12:30:00Z', note: 'x'.repeat(1024 * 1024) });

describe('sluice dev --input reads bytes', () => {
  let dir: string;
  let summary: DevSummary;
  const lines: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-dev-bytes-'));
    const file = Buffer.concat([
      Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(`${sale('north', 1)}\r\n`),
      NOT_UTF8, Buffer.from('\r\n'),
      Buffer.from(`${OVERSIZED}\r\n${sale('south', 2)}\r\n${sale('north', 3)}\r\n`),
    ]);
    writeFileSync(join(dir, 'events.jsonl'), file);
    summary = await runDev({ input: join(dir, 'events.jsonl'), shards: 1, batchSize: 10, print: (line) => lines.push(line) });
  }, 180_000);

  afterAll(() => { if (dir) rmSync(dir, { recursive: true, force: true }); });

  it('finishes with its summary, the oversized record reported and skipped', () => {
    const out = lines.join('\n');
    expect(out).toContain('== summary ==');
    expect(out).toMatch(/events: .*events\.jsonl \(4 records, 1 skipped\)/);
    expect(out).toMatch(/note: line 3 skipped: \d+ bytes with its partition key, over Kinesis's 1048576-byte \(1 MiB\) record limit/);
    expect(out).toContain('note: the file starts with a UTF-8 byte-order mark; it was removed');
    expect(out).toContain('note: 5 lines ended in CR LF; the CR was removed');
    expect(summary.skippedInput.map((s) => s.line)).toEqual([3]);
  });

  it('dead-letters the line that is not UTF-8, bytes unchanged, and only that one: the first line counts', () => {
    expect(summary.inputRows).toBe(3);
    expect(summary.deadLetters).toHaveLength(1);
    const [dead] = summary.deadLetters;
    expect(Buffer.from(dead!.dataBase64, 'base64').equals(NOT_UTF8)).toBe(true);
    expect(dead!.reason).toMatch(/UTF-8/i);
  });
});
