/** Runs a spark-diff case on Sluice's in-memory engine, in the shape the Spark runner reports. */
import { Decimal } from '../../lib/core/decimal.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import type { DataType } from '../../lib/plan/data-types.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { buildInputs, buildQuery, toEngineValue, UnsupportedScenario } from '../conformance/scenario-query.js';
import type { BatchRecord, DiffCase, EngineResult, Refusal } from './case-format.js';

function refusal(phase: Refusal['phase'], error: unknown): Refusal {
  const e = error as Error & { errorClass?: string; code?: string };
  return { phase, errorClass: e.errorClass ?? e.code ?? null, message: String(e.message).split('\n')[0]!.slice(0, 600) };
}

/** Engine values to the runner's plain form: structs stay objects, timestamps stay micros. */
function plain(v: unknown, t: DataType): unknown {
  if (v === null || v === undefined) return null;
  if (typeof v === 'bigint') return Number(v);
  if (v instanceof Decimal) return v.toString(); // the runner writes Spark's Decimal as its text
  if (v instanceof Uint8Array) return [...v];
  if (v instanceof Map && typeof t === 'object' && t.kind === 'map') return Object.fromEntries([...v].map(([k, x]) => [String(k), plain(x, t.value)]));
  // JSON has no NaN or infinities: both sides write them as these strings (see spark_runner.py).
  if (typeof v === 'number' && !Number.isFinite(v)) return Number.isNaN(v) ? 'NaN' : v > 0 ? 'Infinity' : '-Infinity';
  if (typeof t === 'object' && t.kind === 'array' && Array.isArray(v)) return v.map((x) => plain(x, t.element));
  if (typeof t === 'object' && t.kind === 'struct' && typeof v === 'object') {
    return Object.fromEntries(t.fields.map((f) => [f.name, plain((v as Record<string, unknown>)[f.name], f.type)]));
  }
  return v;
}

export async function runOnSluice(c: DiffCase): Promise<EngineResult> {
  const result: EngineResult = { id: c.id, steps: [], refusal: null };
  const inputs = buildInputs(c, { ...(c.conf ?? {}) });
  let df: DataFrame;
  try {
    df = buildQuery([...c.query], inputs);
  } catch (error) {
    if (error instanceof UnsupportedScenario) throw error;
    return { ...result, refusal: refusal('definition', error) };
  }
  const types = df.plan.output.map((a) => a.type);
  const batches: BatchRecord[] = [];
  let query;
  try {
    query = await df.writeStream
      .outputMode(c.outputMode)
      .foreachBatch((batch, batchId) => {
        batches.push({ batchId, rows: batch.collect().map((r) => r.map((v, i) => plain(v, types[i]!))), progress: null });
      })
      .checkpoint(new MemoryCheckpoint())
      .start();
  } catch (error) {
    return { ...result, refusal: refusal('start', error) };
  }
  try {
    for (const step of c.steps) {
      const before = batches.length;
      for (const [name, rows] of Object.entries(step)) {
        const stream = inputs.streams.get(name);
        if (!stream) throw new UnsupportedScenario(`step feeds unknown stream ${name}`);
        const t = inputs.types.get(name)!;
        stream.addData(rows.map((r) => (r as unknown[]).map((v, i) => toEngineValue(v, t[i]!))));
      }
      await query.processAllAvailable();
      const progress = new Map(query.recentProgress.map((p) => [p.batchId, p]));
      result.steps.push(batches.slice(before).map((b) => {
        const p = progress.get(b.batchId);
        return {
          ...b,
          progress: p === undefined ? null : {
            numInputRows: p.numInputRows,
            watermarkMs: p.eventTime.watermark === undefined ? null : Date.parse(p.eventTime.watermark),
            stateRows: p.stateOperators.map((o) => o.numRowsTotal),
            droppedByWatermark: p.stateOperators.map((o) => o.numRowsDroppedByWatermark),
          },
        };
      }));
    }
  } catch (error) {
    if (error instanceof UnsupportedScenario) throw error;
    return { ...result, refusal: refusal('runtime', error) };
  } finally {
    await query.stop().catch(() => undefined);
  }
  return result;
}
