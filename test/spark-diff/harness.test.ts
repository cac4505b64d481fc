/** The harness's own logic (no Spark here): comparison, seeded generation, shrinking. */
import { describe, expect, it } from 'vitest';
import { compare, coreMessage } from './compare.js';
import { generateCase } from './generate.js';
import { shrink } from './shrink.js';
import type { DiffCase, EngineResult } from './case-format.js';
import { readFileSync } from 'node:fs';
import { DIFF_GROUP_FUNCTIONS, DIFF_PROCESSORS } from './diff-processors.js';
import { runOnSluice } from './sluice-side.js';

const base: DiffCase = { id: 't', shape: 's', inputs: [{ name: 'in', kind: 'stream', schema: [] }], query: [], outputMode: 'append', steps: [] };
const result = (rows: unknown[][], stateRows = [1]): EngineResult => ({
  id: 't', refusal: null,
  steps: [[{ batchId: 0, rows, progress: { numInputRows: 1, watermarkMs: 0, stateRows, droppedByWatermark: [0] } }]],
});

describe('spark-diff harness', () => {
  it('compares rows as a multiset, numbers to 12 digits, and reports state rows', () => {
    expect(compare(base, result([[1, 0.1 + 0.2], [2, 1]]), result([[2, 1], [1, 0.3]]), [])).toEqual([]);
    const d = compare(base, result([[1]], [2]), result([[1], [1]], [1]), []);
    expect(d.map((x) => x.where)).toEqual(['step 0 batch 0: rows', 'step 0 batch 0: stateRows']);
  });

  it('matches a refusal by phase and Spark\'s sentence, without its [CLASS] prefix and SQLSTATE', () => {
    expect(coreMessage('[X.Y] Invalid mode: append. More text SQLSTATE: 42KDE')).toBe('Invalid mode: append');
    const spark = { id: 't', steps: [], refusal: { phase: 'start' as const, errorClass: null, message: 'Sampling is not supported on streaming DataFrames/Datasets;' } };
    const ours = { id: 't', steps: [], refusal: { phase: 'start' as const, errorClass: 'X', message: 'Sampling is not supported on streaming DataFrames/Datasets' } };
    expect(compare(base, spark, ours, [])).toEqual([]);
    expect(compare(base, spark, { ...ours, refusal: { ...ours.refusal, phase: 'definition' } }, [])).toHaveLength(1);
  });

  it('matches a failed batch by the cause\'s error class inside Spark\'s STREAM_FAILED wrapper', () => {
    const spark = { id: 't', steps: [], refusal: { phase: 'runtime' as const, errorClass: 'STREAM_FAILED', message: '[STREAM_FAILED] Query [id = 1] terminated with exception: ...', detail: 'Traceback ... ArithmeticException: [ARITHMETIC_OVERFLOW] integer overflow. SQLSTATE: 22003' } };
    const ours = { id: 't', steps: [], refusal: { phase: 'runtime' as const, errorClass: 'ARITHMETIC_OVERFLOW', message: 'Query q terminated with exception: [ARITHMETIC_OVERFLOW] int overflow in abs.' } };
    expect(compare(base, spark, ours, [])).toEqual([]);
    expect(compare(base, spark, { ...ours, refusal: { ...ours.refusal, errorClass: 'DIVIDE_BY_ZERO', message: 'Query q terminated with exception: [DIVIDE_BY_ZERO] Division by zero.' } }, [])).toHaveLength(1);
  });

  it('compares NaN and the infinities as such, not as NULL', () => {
    expect(compare(base, result([['NaN']]), result([[null]]), [])).toHaveLength(1);
  });

  it('generates the same case for the same seed', () => {
    const shape = { inputs: [{ name: 'in', kind: 'stream', schema: [] }], query: [], outputMode: 'append' };
    const opts = { maxSteps: 5, maxRowsPerStep: 4, spread: 12 };
    expect(generateCase('s', shape, 7, opts)).toEqual(generateCase('s', shape, 7, opts));
    expect(generateCase('s', shape, 7, opts)).not.toEqual(generateCase('s', shape, 8, opts));
  });

  it('shrinks to the smallest case that still differs', async () => {
    const big: DiffCase = { ...base, steps: [{ in: [[1], [2]] }, { in: [[3], [99], [4]] }, { in: [] }] };
    const has99 = async (c: DiffCase): Promise<boolean> => c.steps.some((s) => (s.in ?? []).some((r) => r[0] === 99));
    const { smallest } = await shrink(big, has99, 100);
    expect(smallest.steps).toEqual([{ in: [[99]] }]);
  });

  it('names in every stateful case a processor registered on both sides, and runs it on Sluice', async () => {
    const here = new URL('.', import.meta.url);
    const cases = JSON.parse(readFileSync(new URL('cases/stateful.json', here), 'utf8')) as DiffCase[];
    const python = readFileSync(new URL('stateful_processors.py', here), 'utf8');
    const pythonRegistry = (name: string): string => python.slice(python.indexOf(`${name} = {`)).split('}')[0]!;
    for (const c of cases) {
      for (const op of c.query) {
        if (op.op === 'flatMapGroupsWithState') {
          expect(DIFF_GROUP_FUNCTIONS[op.function], c.id).toBeDefined();
          expect(pythonRegistry('APPLY_IN_PANDAS'), c.id).toContain(`"${op.function}"`);
        } else if (op.op === 'transformWithState') {
          expect(DIFF_PROCESSORS[op.processor], c.id).toBeDefined();
          expect(pythonRegistry('PROCESSORS'), c.id).toContain(`"${op.processor}"`);
        }
      }
      const sluice = await runOnSluice(c);
      expect(sluice.refusal, c.id).toBeNull();
      expect(sluice.steps, c.id).toHaveLength(c.steps.length);
    }
  });
});
