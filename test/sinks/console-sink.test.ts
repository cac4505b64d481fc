/**
 * The console sink prints as Spark's does (Dataset.showString / ToPrettyString): timestamps
 * `2024-01-01 12:00:00`, arrays `[a, b]`, structs `{a, 1}`, NULL, doubles as Java prints them,
 * cells over 20 characters cut, 20 rows and "only showing top 20 rows".
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import { parseTimestamp } from '../../lib/core/timestamps.js';
import { javaDoubleString, showValue, truncateCell } from '../../lib/sinks/show-string.js';

const SCHEMA = 'name string, tags array<string>, info struct<a:string,b:int>, ts timestamp, score double';

async function printed(rows: unknown[][], options: Record<string, string> = {}): Promise<string> {
  const lines: string[] = [];
  vi.spyOn(process.stdout, 'write').mockImplementation((text: string | Uint8Array) => { lines.push(String(text)); return true; });
  const { stream, df } = new SluiceSession().memoryStream(SCHEMA);
  let writer = df.writeStream.format('console').outputMode('append');
  for (const [k, v] of Object.entries(options)) writer = writer.option(k, v);
  const query = await writer.start();
  stream.addData(rows);
  await query.processAllAvailable();
  await query.stop();
  vi.restoreAllMocks();
  return lines.join('');
}

afterEach(() => { vi.restoreAllMocks(); });

describe('the console sink', () => {
  it('prints a batch as Spark does: readable timestamps, [a, b], {a, 1}, NULL, 14.0', async () => {
    const out = await printed([
      ['north', ['a', 'b'], { a: 'x', b: 1 }, parseTimestamp('2024-01-01 12:00:00'), 14],
      [null, [], null, parseTimestamp('2024-01-01 12:00:00.5'), null],
      ['south', ['c', null], { a: null, b: 2 }, null, 0.25],
    ]);
    expect(out).toBe([
      '-------------------------------------------',
      'Batch: 0',
      '-------------------------------------------',
      '+-----+---------+---------+--------------------+-----+',
      '| name|     tags|     info|                  ts|score|',
      '+-----+---------+---------+--------------------+-----+',
      '|north|   [a, b]|   {x, 1}| 2024-01-01 12:00:00| 14.0|',
      '| NULL|       []|     NULL|2024-01-01 12:00:...| NULL|',
      '|south|[c, NULL]|{NULL, 2}|                NULL| 0.25|',
      '+-----+---------+---------+--------------------+-----+',
      '',
    ].join('\n'));
  });

  it('shows 20 rows and says so, and keeps whole cells with truncate false (option numRows, truncate)', async () => {
    const rows = Array.from({ length: 23 }, (_, i) => [`n${i}`, [], null, null, i]);
    const out = await printed(rows);
    expect(out.split('\n').filter((l) => /^\|\s*n\d+\|/.test(l))).toHaveLength(20);
    expect(out).toMatch(/\n\+-+\+.*\nonly showing top 20 rows\n$/);
    const whole = await printed([['x'.repeat(30), [], null, parseTimestamp('2024-01-01 12:00:00.5'), 1]], { numRows: '5', truncate: 'false' });
    expect(whole).toContain(`|${'x'.repeat(30)}|`);
    expect(whole).toContain('2024-01-01 12:00:00.5|');
    expect(whole).not.toContain('only showing');
  });
});

describe('showValue', () => {
  it('formats doubles as Java does', () => {
    expect([1, 14.5, 1e7, 1.5e-4, 0.001, -0, Number.NaN, -Infinity, 123456.789].map(javaDoubleString))
      .toEqual(['1.0', '14.5', '1.0E7', '1.5E-4', '0.001', '-0.0', 'NaN', '-Infinity', '123456.789']);
  });

  it('formats nested values by their type, and a window without a schema as its two timestamps', () => {
    const t = parseTimestamp('2024-05-01 14:00:00')!;
    expect(showValue([[1, null]], { kind: 'array', element: { kind: 'array', element: 'int' } })).toBe('[[1, NULL]]');
    expect(showValue({ start: t, end: t + 3_600_000_000 })).toBe('{2024-05-01 14:00:00, 2024-05-01 15:00:00}');
    expect(truncateCell('{2024-05-01 14:00:00, 2024-05-01 15:00:00}', 20)).toBe('{2024-05-01 14:00...');
  });
});
