/**
 * HyperLogLog++ in the shape Spark's `approx_count_distinct` uses: 2^p six-bit registers where
 * p = ceil(2 * log2(1.106 / rsd)) (rsd 0.05 → p = 9, 512 registers), fed with XXH64 (seed 42) of
 * the value, register index from the top p bits and rank from the rest. Small cardinalities use
 * linear counting below HLL++'s empirical thresholds (as Spark; results then match Spark's);
 * above them, Ertl's improved estimator ("New cardinality estimation algorithms for HyperLogLog
 * sketches", 2017), which needs no bias-correction tables.
 *
 * The buffer is a JSON value, never mutated once stored:
 *  - sparse: `number[]`, the non-zero registers as `index * 64 + rank`, ascending by index;
 *  - dense: `string`, base64 of one byte per register, once more than m/4 registers are set.
 * Both are exact encodings of the same registers, so the estimate does not depend on the form.
 * A per-batch partial buffer (from `initial()`) is a sparse array that `add` updates in place.
 */

export type HllBuffer = number[] | string;

export const DEFAULT_RSD = 0.05;
export const MIN_PRECISION = 4;
export const MAX_PRECISION = 18;

/** HLL++'s thresholds below which linear counting beats the raw estimate, for p = 4..18. */
const LINEAR_COUNTING_THRESHOLDS = [10, 20, 40, 80, 220, 400, 900, 1800, 3100, 6500, 11500, 20000, 50000, 120000, 350000];

/** Spark's precision for a relative standard deviation, or a message saying why it is refused. */
export function precisionForRsd(rsd: number): number | string {
  if (typeof rsd !== 'number' || !Number.isFinite(rsd) || rsd <= 0) return `rsd must be a positive number, got ${String(rsd)}`;
  const p = Math.ceil((2 * Math.log(1.106 / rsd)) / Math.LN2);
  if (p < MIN_PRECISION) return `HLL++ requires at least 4 bits for addressing. Use a lower error, at most 39% (rsd ${rsd}).`;
  if (p > MAX_PRECISION) return `HLL++ supports at most 18 bits for addressing (2^18 registers). Use a larger error, at least 0.22% (rsd ${rsd}).`;
  return p;
}

export class HyperLogLogPlusPlus {
  readonly m: number;
  /** The largest rank a register can hold: 64 - p + 1. */
  private readonly maxRank: number;
  private readonly idxShift: number;
  private readonly padding: number;
  private readonly denseAbove: number;
  /** Scratch registers for merging and estimating (not re-entrant, never escapes). */
  private readonly scratch: Uint8Array;
  private readonly histogram: Float64Array;

  constructor(readonly p: number) {
    if (!Number.isInteger(p) || p < MIN_PRECISION || p > MAX_PRECISION) throw new RangeError(`HLL++ precision must be ${MIN_PRECISION}..${MAX_PRECISION}, got ${p}`);
    this.m = 1 << p;
    this.maxRank = 64 - p + 1;
    this.idxShift = 32 - p;
    this.padding = 1 << (p - 1);
    this.denseAbove = this.m >> 2;
    this.scratch = new Uint8Array(this.m);
    this.histogram = new Float64Array(this.maxRank + 1);
  }

  static forRsd(rsd: number = DEFAULT_RSD): HyperLogLogPlusPlus {
    const p = precisionForRsd(rsd);
    if (typeof p === 'string') throw new RangeError(p);
    return new HyperLogLogPlusPlus(p);
  }

  initial(): HllBuffer {
    return [];
  }

  /**
   * Adds a 64-bit hash (as halves) to a partial buffer, in place when it is sparse; returns the
   * buffer to keep (a dense string is first turned into a sparse array, which is then updated).
   */
  add(buffer: HllBuffer, hashHi: number, hashLo: number): HllBuffer {
    const p = this.p;
    const index = hashHi >>> this.idxShift;
    // Rank: leading zeros of (hash << p | padding), plus one; the padding caps it at 64 - p + 1.
    const high = ((hashHi << p) | (hashLo >>> this.idxShift)) >>> 0;
    const rank = high !== 0 ? Math.clz32(high) + 1 : Math.clz32(((hashLo << p) | this.padding) >>> 0) + 33;
    const list = typeof buffer === 'string' ? this.toSparse(this.decode(buffer)) : buffer;
    // Binary search for the register's entry.
    let lo = 0;
    let hi = list.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (list[mid]! >>> 6 < index) lo = mid + 1;
      else hi = mid;
    }
    const entry = index * 64 + rank;
    if (lo < list.length && list[lo]! >>> 6 === index) {
      if ((list[lo]! & 63) < rank) list[lo] = entry;
    } else {
      list.splice(lo, 0, entry);
    }
    return list;
  }

  /** The union of two buffers, as a new buffer (neither input is changed). */
  merge(a: HllBuffer, b: HllBuffer): HllBuffer {
    if (typeof a !== 'string' && typeof b !== 'string') {
      const merged = b.length === 0 ? a : a.length === 0 ? b : mergeSparse(a, b);
      if (merged.length <= this.denseAbove) return merged;
    } else if (typeof a !== 'string' && a.length === 0) {
      return b;
    } else if (typeof b !== 'string' && b.length === 0) {
      return a;
    }
    const registers = this.scratch;
    registers.fill(0);
    this.fold(registers, a);
    this.fold(registers, b);
    return this.encode(registers);
  }

  /** The estimated number of distinct values, rounded as Spark does. */
  estimate(buffer: HllBuffer): number {
    const m = this.m;
    const c = this.histogram;
    c.fill(0);
    if (typeof buffer === 'string') {
      const registers = this.decode(buffer);
      for (let i = 0; i < m; i++) c[registers[i]!]!++;
    } else {
      c[0] = m - buffer.length;
      for (const e of buffer) c[e & 63]!++;
    }
    const zeros = c[0]!;
    if (zeros > 0) {
      const linear = m * Math.log(m / zeros);
      if (linear <= LINEAR_COUNTING_THRESHOLDS[this.p - MIN_PRECISION]!) return Math.round(linear);
    }
    return Math.round(this.ertlEstimate(c));
  }

  /** Ertl's improved raw estimator over the register histogram c[0..q+1], q = 64 - p. */
  private ertlEstimate(c: Float64Array): number {
    const m = this.m;
    const q = this.maxRank - 1;
    let z = m * tau((m - c[q + 1]!) / m);
    for (let k = q; k >= 1; k--) z = 0.5 * (z + c[k]!);
    z += m * sigma(c[0]! / m);
    return (m * m) / (2 * Math.LN2 * z);
  }

  private fold(registers: Uint8Array, buffer: HllBuffer): void {
    if (typeof buffer === 'string') {
      const other = decodeBase64(buffer, this.m);
      for (let i = 0; i < this.m; i++) if (other[i]! > registers[i]!) registers[i] = other[i]!;
    } else {
      for (const e of buffer) {
        const i = e >>> 6;
        const r = e & 63;
        if (r > registers[i]!) registers[i] = r;
      }
    }
  }

  private encode(registers: Uint8Array): HllBuffer {
    let set = 0;
    for (let i = 0; i < this.m; i++) if (registers[i] !== 0) set++;
    if (set > this.denseAbove) return Buffer.from(registers.buffer, registers.byteOffset, registers.length).toString('base64');
    return this.toSparse(registers);
  }

  private toSparse(registers: Uint8Array): number[] {
    const out: number[] = [];
    for (let i = 0; i < this.m; i++) if (registers[i] !== 0) out.push(i * 64 + registers[i]!);
    return out;
  }

  /** The registers of a dense buffer (a fresh array). */
  decode(buffer: string): Uint8Array {
    return decodeBase64(buffer, this.m);
  }

  /** The registers of any buffer (a fresh array); for tests and tools. */
  registers(buffer: HllBuffer): Uint8Array {
    if (typeof buffer === 'string') return this.decode(buffer);
    const out = new Uint8Array(this.m);
    this.fold(out, buffer);
    return out;
  }
}

function decodeBase64(text: string, m: number): Uint8Array {
  const bytes = Buffer.from(text, 'base64');
  if (bytes.length !== m) throw new Error(`HLL++ buffer has ${bytes.length} registers, expected ${m}: the state was written with another precision`);
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length);
}

/** Merges two sparse lists (ascending by index), keeping the larger rank per index. */
function mergeSparse(a: readonly number[], b: readonly number[]): number[] {
  const out: number[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    const x = a[i]!;
    const y = b[j]!;
    const xi = x >>> 6;
    const yi = y >>> 6;
    if (xi < yi) {
      out.push(x);
      i++;
    } else if (yi < xi) {
      out.push(y);
      j++;
    } else {
      out.push(x > y ? x : y);
      i++;
      j++;
    }
  }
  while (i < a.length) out.push(a[i++]!);
  while (j < b.length) out.push(b[j++]!);
  return out;
}

/** σ(x) = x + Σ_{k≥1} x^(2^k) 2^(k-1) (Ertl, 2017). */
function sigma(x: number): number {
  if (x === 1) return Infinity;
  let y = 1;
  let z = x;
  for (;;) {
    x *= x;
    const previous = z;
    z += x * y;
    y += y;
    if (z === previous) return z;
  }
}

/** τ(x) = (1 - x - Σ_{k≥1} (1 - x^(2^-k))^2 2^-k) / 3 (Ertl, 2017). */
function tau(x: number): number {
  if (x === 0 || x === 1) return 0;
  let y = 1;
  let z = 1 - x;
  for (;;) {
    x = Math.sqrt(x);
    const previous = z;
    y *= 0.5;
    z -= (1 - x) ** 2 * y;
    if (z === previous) return z / 3;
  }
}
