/**
 * Rounding as Spark's Round/BRound do it: on the decimal value (Scala's BigDecimal(d), i.e. the
 * digits Double.toString prints), not on the binary double. So round(2.675, 2) is 2.68 in Spark,
 * where rounding the binary value (2.67499999...) would give 2.67.
 */
export type RoundingMode = 'HALF_UP' | 'HALF_EVEN';

/** `digits * 10^exponent`, with `digits` non-negative. */
function decimalOf(d: number): { negative: boolean; digits: bigint; exponent: number } {
  const [mantissa, exp] = Math.abs(d).toExponential().split('e') as [string, string];
  const [whole, fraction = ''] = mantissa.split('.');
  return { negative: d < 0, digits: BigInt(whole! + fraction), exponent: Number(exp) - fraction.length };
}

/** `digits * 10^exponent` rounded to `scale` decimal places: the integer count of 10^-scale units. */
function roundDigits(digits: bigint, exponent: number, scale: number, mode: RoundingMode): bigint {
  const shift = exponent + scale;
  if (shift >= 0) return digits * 10n ** BigInt(shift);
  const base = 10n ** BigInt(-shift);
  const q = digits / base;
  const twice = (digits % base) * 2n;
  if (twice > base || (twice === base && (mode === 'HALF_UP' || q % 2n === 1n))) return q + 1n;
  return q;
}

export function roundDouble(d: number, scale: number, mode: RoundingMode): number {
  if (!Number.isFinite(d) || d === 0) return d;
  const { negative, digits, exponent } = decimalOf(d);
  if (exponent + scale >= 0) return d;
  const units = roundDigits(digits, exponent, scale, mode);
  if (units === 0n) return 0;
  const value = Number(`${units}e${-scale}`);
  return negative ? -value : value;
}

/** An integer rounded to a negative scale (round(1250, -2) = 1300 HALF_UP); a non-negative scale keeps it. */
export function roundInteger(v: bigint, scale: number, mode: RoundingMode): bigint {
  if (scale >= 0) return v;
  const negative = v < 0n;
  const units = roundDigits(negative ? -v : v, 0, scale, mode) * 10n ** BigInt(-scale);
  return negative ? -units : units;
}

/** The exact binary value of a finite double as `digits * 10^-scale` (Java's new BigDecimal(double)). */
function exactDecimalOf(d: number): { digits: bigint; scale: number } {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, Math.abs(d));
  const bits = view.getBigUint64(0);
  const biased = Number(bits >> 52n);
  const fraction = bits & ((1n << 52n) - 1n);
  const mantissa = biased === 0 ? fraction : fraction | (1n << 52n);
  const exponent = (biased === 0 ? 1 : biased) - 1075;
  if (exponent >= 0) return { digits: mantissa << BigInt(exponent), scale: 0 };
  return { digits: mantissa * 5n ** BigInt(-exponent), scale: -exponent };
}

/**
 * `|d|` with exactly `decimals` fraction digits, rounded on its exact binary value, as Java's
 * DecimalFormat rounds a double (format_number: HALF_EVEN).
 */
export function fixedDigitsExact(d: number, decimals: number, mode: RoundingMode): string {
  const { digits, scale } = exactDecimalOf(d);
  const units = roundDigits(digits, -scale, decimals, mode);
  const text = units.toString().padStart(decimals + 1, '0');
  return decimals === 0 ? text : `${text.slice(0, -decimals)}.${text.slice(-decimals)}`;
}
