import type { BoundCall } from '../../analysis/bound-expr.js';
import { AnsiDataError } from '../../core/ansi-errors.js';
import { INT_MAX, INT_MIN, longFromBigInt } from '../../core/long.js';
import { isTimestampInRange } from '../../core/timestamps.js';
import { typeToString, type DataType } from '../../plan/data-types.js';
import { describeUserFunction, type UserFunction } from '../../plan/user-function.js';
import type { Evaluator } from './implementation.js';

/**
 * Spark's FAILED_EXECUTE_UDF (SQLSTATE 39000): the UDF threw, or returned a value its declared type
 * cannot hold. Spark fails the query; like the ANSI value errors, every retry would fail the same
 * way, so on the streaming runtime the record that made it is dead-lettered with this reason
 * (lib/query/unwritable-rows.ts), and the in-memory query fails as Spark's does.
 */
export class UdfExecutionError extends AnsiDataError {}

function udfFailed(call: BoundCall, udf: UserFunction, reason: string, cause?: unknown): UdfExecutionError {
  const signature = describeUserFunction(udf, call.args.map((a) => a.type));
  const message = (why: string): string => `[FAILED_EXECUTE_UDF] User defined function (${signature}) failed due to: ${why}. SQLSTATE: 39000`;
  return new UdfExecutionError(message(reason), {
    code: 'FAILED_EXECUTE_UDF', errorClass: 'FAILED_EXECUTE_UDF', retryable: false, cause,
    hint: `fix ${udf.name} for this input, or handle it there (return null); the input record is dead-lettered on the deployed runtime.`,
    // A user's error message may quote the row: logs get its class only, the dead letter all of it.
    logMessage: message(`${cause instanceof Error ? cause.name : 'a value'} (details in the dead letter)`),
  });
}

/**
 * A UDF over engine values, as Spark passes them to a Python UDF: NULL arrives as `null` (the
 * function decides), timestamps as microseconds since the epoch, longs as numbers (bigints beyond
 * 2^53), structs as objects, arrays as arrays. `undefined` returned is NULL.
 */
export function compileUserFunction(udf: UserFunction, args: readonly Evaluator[], call: BoundCall): Evaluator {
  const { fn, returnType } = udf;
  return (row) => {
    const values = new Array<unknown>(args.length);
    for (let i = 0; i < args.length; i++) values[i] = args[i]!(row);
    let result: unknown;
    try {
      result = fn(...values);
    } catch (error) {
      throw udfFailed(call, udf, error instanceof Error ? `${error.name}: ${error.message}` : String(error), error);
    }
    const value = toEngineValue(result, returnType);
    if (value === MISMATCH) throw udfFailed(call, udf, `it returned ${describeValue(result)}, which is not a value of its declared return type ${typeToString(returnType)}`);
    return value;
  };
}

const MISMATCH = Symbol('mismatch');

/** The returned value as the engine holds a value of `type`, or MISMATCH. */
function toEngineValue(v: unknown, type: DataType): unknown {
  if (v === null || v === undefined) return null;
  if (typeof type === 'object') {
    if (type.kind === 'array') {
      if (!Array.isArray(v)) return MISMATCH;
      const out = v.map((x) => toEngineValue(x, type.element));
      return out.includes(MISMATCH) ? MISMATCH : out;
    }
    if (type.kind === 'struct') {
      if (typeof v !== 'object' || Array.isArray(v)) return MISMATCH;
      const out: Record<string, unknown> = {};
      for (const f of type.fields) {
        const x = toEngineValue((v as Record<string, unknown>)[f.name], f.type);
        if (x === MISMATCH) return MISMATCH;
        out[f.name] = x;
      }
      return out;
    }
    return v;
  }
  switch (type) {
    case 'string': return typeof v === 'string' ? v : MISMATCH;
    case 'boolean': return typeof v === 'boolean' ? v : MISMATCH;
    case 'double': return typeof v === 'number' ? v : typeof v === 'bigint' ? Number(v) : MISMATCH;
    case 'int': return typeof v === 'number' && Number.isInteger(v) && v >= INT_MIN && v <= INT_MAX ? v + 0 : MISMATCH;
    case 'long':
      if (typeof v === 'number') return Number.isSafeInteger(v) ? v + 0 : MISMATCH;
      return typeof v === 'bigint' ? (longFromBigInt(v) ?? MISMATCH) : MISMATCH;
    case 'timestamp': {
      // A Date is the natural TypeScript timestamp; a number is microseconds, as the engine's.
      const micros = v instanceof Date ? v.getTime() * 1000 : v;
      return typeof micros === 'number' && Number.isSafeInteger(micros) && isTimestampInRange(micros) ? micros : MISMATCH;
    }
    default:
      return v;
  }
}

function describeValue(v: unknown): string {
  if (Array.isArray(v)) return 'an array';
  if (v instanceof Date) return 'a Date';
  return `a ${typeof v}`;
}
