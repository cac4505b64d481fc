/**
 * Spark's `decimal(p, s)` as an engine value: an immutable `Decimal` holding the exact unscaled
 * integer (a bigint) and the scale, value = unscaled × 10^-scale. A column of type decimal(p, s)
 * holds values of scale s only, so one value has one representation there (grouping keys, `===` of
 * the text agree). bigint over decimal.js / big.js: the value is an integer and a scale, every
 * operation Spark defines on it (rescale with HALF_UP, precision check, + - * / %) is a few lines of
 * integer arithmetic, exact at 38 digits, with no dependency and no global precision setting to
 * get wrong; decimal.js/big.js would give arbitrary-precision floats whose rounding context must
 * be pinned per call to mimic Spark's fixed scale anyway.
 */
import { AnsiDataError } from './ansi-errors.js';

export const MAX_DECIMAL_PRECISION = 38;

const POW10: bigint[] = [1n];
export function pow10(n: number): bigint {
  while (POW10.length <= n) POW10.push(POW10[POW10.length - 1]! * 10n);
  return POW10[n]!;
}

export class Decimal {
  constructor(readonly unscaled: bigint, readonly scale: number) {}

  /** Spark's Decimal.toString: plain digits with exactly `scale` fraction digits (`1.50`, `-0.05`). */
  toString(): string {
    const negative = this.unscaled < 0n;
    const digits = (negative ? -this.unscaled : this.unscaled).toString();
    if (this.scale === 0) return `${negative ? '-' : ''}${digits}`;
    const padded = digits.padStart(this.scale + 1, '0');
    return `${negative ? '-' : ''}${padded.slice(0, -this.scale)}.${padded.slice(-this.scale)}`;
  }

  toNumber(): number {
    return Number(this.toString());
  }

  /** Number of significant digits of the unscaled value (0 has precision 1). */
  digits(): number {
    const abs = this.unscaled < 0n ? -this.unscaled : this.unscaled;
    return abs.toString().length;
  }
}

/** Compares two decimals of any scales exactly. */
export function compareDecimals(a: Decimal, b: Decimal): number {
  const scale = Math.max(a.scale, b.scale);
  const x = a.unscaled * pow10(scale - a.scale);
  const y = b.unscaled * pow10(scale - b.scale);
  return x < y ? -1 : x > y ? 1 : 0;
}

/** Divides and rounds HALF_UP (away from zero on a tie), as java.math.RoundingMode.HALF_UP. */
export function divideHalfUp(n: bigint, d: bigint): bigint {
  if (d < 0n) { n = -n; d = -d; }
  const q = n / d;
  const r = n % d;
  if (r === 0n) return q;
  const twice = (r < 0n ? -r : r) * 2n;
  if (twice >= d) return n < 0n ? q - 1n : q + 1n;
  return q;
}

/** The value at another scale, HALF_UP when digits are dropped (Spark's changePrecision). */
export function rescale(v: Decimal, scale: number): Decimal {
  if (scale === v.scale) return v;
  if (scale > v.scale) return new Decimal(v.unscaled * pow10(scale - v.scale), scale);
  return new Decimal(divideHalfUp(v.unscaled, pow10(v.scale - scale)), scale);
}

/** Fits `v` to decimal(precision, scale), or null when its integral part needs more digits. */
export function toPrecision(v: Decimal, precision: number, scale: number): Decimal | null {
  const r = rescale(v, scale);
  const abs = r.unscaled < 0n ? -r.unscaled : r.unscaled;
  return abs < pow10(precision) ? r : null;
}

/** Spark 4's NUMERIC_VALUE_OUT_OF_RANGE (ANSI): a value that does not fit decimal(p, s). */
export function numericValueOutOfRange(value: string, precision: number, scale: number): AnsiDataError {
  return new AnsiDataError(
    `[NUMERIC_VALUE_OUT_OF_RANGE.WITH_SUGGESTION]  ${value} cannot be represented as Decimal(${precision}, ${scale}). If necessary set "spark.sql.ansi.enabled" to "false" to bypass this error, and return NULL instead. SQLSTATE: 22003`,
    { code: 'NUMERIC_VALUE_OUT_OF_RANGE', errorClass: 'NUMERIC_VALUE_OUT_OF_RANGE.WITH_SUGGESTION', retryable: false, hint: 'widen the decimal type, or use try_cast.' },
  );
}

/** `toPrecision` under ANSI: NUMERIC_VALUE_OUT_OF_RANGE instead of null. */
export function checkPrecision(v: Decimal, precision: number, scale: number): Decimal {
  const r = toPrecision(v, precision, scale);
  if (r === null) throw numericValueOutOfRange(v.toString(), precision, scale);
  return r;
}

/**
 * Decimal text (`-12.5`, `1e3`, `.5`, surrounding whitespace) as an exact Decimal at its own
 * scale, or null when malformed (Spark's Decimal.fromStringANSI accepts the same shapes).
 */
export function parseDecimal(text: string): Decimal | null {
  const m = /^\s*([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?\s*$/.exec(text);
  if (!m || (m[2] === '' && (m[3] ?? '') === '')) return null;
  const fraction = m[3] ?? '';
  let unscaled = BigInt(`${m[2] || '0'}${fraction}`);
  if (m[1] === '-') unscaled = -unscaled;
  let scale = fraction.length - Number(m[4] ?? '0');
  if (scale < 0) {
    unscaled *= pow10(-scale);
    scale = 0;
  }
  return new Decimal(unscaled, scale);
}

/** A long (number or bigint) as decimal(p, 0). */
export function decimalFromInteger(v: number | bigint): Decimal {
  return new Decimal(typeof v === 'bigint' ? v : BigInt(v), 0);
}

/**
 * A finite double as an exact-enough Decimal: Java's BigDecimal.valueOf(double) (the shortest
 * text that reads back as the double), which is what Spark's cast from double uses.
 */
export function decimalFromDouble(v: number): Decimal | null {
  if (!Number.isFinite(v)) return null;
  return parseDecimal(String(v));
}

/** The long part of a decimal (truncated toward zero, as Spark's cast to bigint). */
export function decimalToInteger(v: Decimal): bigint {
  return v.unscaled / pow10(v.scale);
}

export function addDecimals(a: Decimal, b: Decimal): Decimal {
  const scale = Math.max(a.scale, b.scale);
  return new Decimal(rescale(a, scale).unscaled + rescale(b, scale).unscaled, scale);
}

export function subtractDecimals(a: Decimal, b: Decimal): Decimal {
  const scale = Math.max(a.scale, b.scale);
  return new Decimal(rescale(a, scale).unscaled - rescale(b, scale).unscaled, scale);
}

export function multiplyDecimals(a: Decimal, b: Decimal): Decimal {
  return new Decimal(a.unscaled * b.unscaled, a.scale + b.scale);
}

/** a / b rounded HALF_UP to `scale` digits; the caller handles a zero divisor. */
export function divideDecimals(a: Decimal, b: Decimal, scale: number): Decimal {
  // a/b = (ua / ub) × 10^(sb - sa); at `scale`: ua × 10^(scale + sb - sa) / ub.
  const shift = scale + b.scale - a.scale;
  const n = shift >= 0 ? a.unscaled * pow10(shift) : a.unscaled;
  const d = shift >= 0 ? b.unscaled : b.unscaled * pow10(-shift);
  return new Decimal(divideHalfUp(n, d), scale);
}

/** Java's BigDecimal.remainder (sign of the dividend); the caller handles a zero divisor. */
export function remainderDecimals(a: Decimal, b: Decimal): Decimal {
  const scale = Math.max(a.scale, b.scale);
  return new Decimal(rescale(a, scale).unscaled % rescale(b, scale).unscaled, scale);
}
