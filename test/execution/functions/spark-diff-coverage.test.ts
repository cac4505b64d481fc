import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { builtinFunctionNames } from '../../../lib/plan/function-catalog/index.js';

describe('the scalar function catalog against Spark', () => {
  it('has every function called in a spark-diff case (cases/functions.json, or types.json for date/time), so each is checked against PySpark', () => {
    const cases = ['functions.json', 'types.json'].map((f) => readFileSync(new URL(`../../spark-diff/cases/${f}`, import.meta.url), 'utf8')).join('\n');
    const called = new Set([...cases.matchAll(/"fn": "([^"]+)"/g)].map((m) => m[1]));
    expect(builtinFunctionNames().filter((name) => !called.has(name))).toEqual([]);
  });
});
