import type { DataType } from '../../plan/data-types.js';
import { formatTimestamp } from '../../core/timestamps.js';
import { longToDouble, type LongValue } from '../../core/long.js';
import type { Evaluator } from './implementation.js';

/**
 * Java's Double.toString, which Spark uses to render a double as text (cast to string, JSON):
 * `1.0`, `0.001`, `1.0E7`, `1.0E-4`. The digits are the shortest that read back as the same
 * double (JavaScript's choice; JDK 19+ makes the same one).
 */
export function javaDoubleString(d: number): string {
  if (Number.isNaN(d)) return 'NaN';
  if (d === Infinity) return 'Infinity';
  if (d === -Infinity) return '-Infinity';
  if (d === 0) return Object.is(d, -0) ? '-0.0' : '0.0';
  const [mantissa, exp] = d.toExponential().split('e') as [string, string];
  const exponent = Number(exp);
  const abs = Math.abs(d);
  if (abs >= 1e-3 && abs < 1e7) {
    const text = String(d);
    return text.includes('.') ? text : `${text}.0`;
  }
  return `${mantissa.includes('.') ? mantissa : `${mantissa}.0`}E${exponent}`;
}

/** A value of `type` as Spark's CAST(... AS STRING) writes it (the implicit cast of string arguments). */
export function sparkString(v: unknown, type: DataType): string {
  if (typeof v === 'string') return v;
  if (type === 'double' && typeof v === 'number') return javaDoubleString(v);
  if (type === 'timestamp' && typeof v === 'number') return formatTimestamp(v);
  return String(v);
}

/** An evaluator whose non-NULL values are brought from `from` to `to` (int/long to double, atoms to string). */
export function coerced(arg: Evaluator, from: DataType, to: DataType): Evaluator {
  if (from === to || from === 'null') return arg;
  if (to === 'double' && (from === 'int' || from === 'long')) {
    return (row) => { const v = arg(row); return v === null || v === undefined ? null : longToDouble(v as LongValue); };
  }
  if (to === 'double' && from === 'string') {
    return (row) => { const v = arg(row); return v === null || v === undefined ? null : Number(v); };
  }
  if (to === 'string') return (row) => { const v = arg(row); return v === null || v === undefined ? null : sparkString(v, from); };
  return arg;
}

/** The argument evaluators, each brought to the call's string parameters (implicit casts). */
export function asStrings(args: readonly Evaluator[], types: readonly DataType[]): Evaluator[] {
  return args.map((a, i) => coerced(a, types[i]!, 'string'));
}
