/** Compares what Spark and Sluice did with one case, step by step. */
import type { BatchRecord, DiffCase, EngineResult, Refusal } from './case-format.js';

export interface Difference {
  readonly where: string;
  readonly spark: unknown;
  readonly sluice: unknown;
}

function canonical(v: unknown, sortArrays: boolean): unknown {
  if (typeof v === 'number') return Number.isInteger(v) ? v : Number(v.toPrecision(12));
  if (Array.isArray(v)) {
    const items = v.map((x) => canonical(x, false));
    return sortArrays ? items.sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1)) : items;
  }
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.keys(v).sort().map((k) => [k, canonical((v as Record<string, unknown>)[k], false)]));
  }
  return v ?? null;
}

function rowKeys(rows: unknown[][], unordered: readonly number[]): string[] {
  return rows.map((r) => JSON.stringify(r.map((x, i) => canonical(x, unordered.includes(i))))).sort();
}

/** Spark's messages start with `[ERROR_CLASS] ` and end with ` SQLSTATE: ...`; the sentence is what both can share. */
export function coreMessage(message: string): string {
  return message.replace(/^\[[A-Z0-9_.]+\]\s*/, '').replace(/\s*SQLSTATE:.*$/, '').split(/(?<=[.;])\s/)[0]!.trim().replace(/[.;]$/, '');
}

function refusalMatches(spark: Refusal, sluice: Refusal): boolean {
  if (spark.phase !== sluice.phase) return false;
  if (spark.errorClass && sluice.errorClass === spark.errorClass) return true;
  const core = coreMessage(spark.message).toLowerCase();
  if (core.length > 0 && sluice.message.toLowerCase().includes(core)) return true;
  // A failed batch: Spark wraps the cause (STREAM_FAILED, FOREACH_BATCH_USER_FUNCTION_ERROR); the
  // cause's error class, or Sluice's sentence, must appear in Spark's whole text.
  if (spark.phase !== 'runtime') return false;
  const detail = spark.detail ?? '';
  if (sluice.errorClass && detail.includes(`[${sluice.errorClass}]`)) return true;
  const ours = coreMessage(sluice.message.replace(/^Query \S+ terminated with exception: /, '')).toLowerCase();
  return ours.length > 0 && detail.toLowerCase().includes(ours);
}

export function compare(c: DiffCase, spark: EngineResult, sluice: EngineResult, columns: readonly string[]): Difference[] {
  const diffs: Difference[] = [];
  if (spark.refusal || sluice.refusal) {
    if (!spark.refusal || !sluice.refusal || !refusalMatches(spark.refusal, sluice.refusal)) {
      diffs.push({ where: 'refusal', spark: spark.refusal, sluice: sluice.refusal });
    }
    if (spark.refusal && sluice.refusal) return diffs;
  }
  const unordered = (c.unorderedArrays ?? []).map((name) => columns.indexOf(name)).filter((i) => i >= 0);
  const steps = Math.max(spark.steps.length, sluice.steps.length);
  for (let s = 0; s < steps; s++) {
    const a: BatchRecord[] = spark.steps[s] ?? [];
    const b: BatchRecord[] = sluice.steps[s] ?? [];
    const ids = (x: BatchRecord[]): number[] => x.map((r) => r.batchId);
    if (JSON.stringify(ids(a)) !== JSON.stringify(ids(b))) {
      diffs.push({ where: `step ${s}: batches run`, spark: ids(a), sluice: ids(b) });
    }
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      const at = `step ${s} batch ${a[i]!.batchId}`;
      const ra = rowKeys(a[i]!.rows, unordered);
      const rb = rowKeys(b[i]!.rows, unordered);
      if (JSON.stringify(ra) !== JSON.stringify(rb)) diffs.push({ where: `${at}: rows`, spark: ra, sluice: rb });
      const pa = a[i]!.progress;
      const pb = b[i]!.progress;
      if (!pa || !pb) continue;
      for (const key of ['numInputRows', 'watermarkMs', 'stateRows', 'droppedByWatermark'] as const) {
        if (JSON.stringify(pa[key]) !== JSON.stringify(pb[key])) diffs.push({ where: `${at}: ${key}`, spark: pa[key], sluice: pb[key] });
      }
    }
  }
  return diffs;
}
