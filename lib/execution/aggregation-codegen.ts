import type { BoundAggregate, BoundExpr } from '../analysis/bound-expr.js';
import type { AggregateFunction } from './aggregate-functions.js';
import type { Evaluator, Row } from './evaluate.js';
import { compareValues } from './values.js';

/**
 * A group of a streaming aggregation, in the operator's working table: its key values, its
 * stored value, and this batch's partial buffers as fields of a class generated per aggregation
 * (`p0`, `p1`, ...), so that a double sum is updated in place rather than boxed on each row.
 */
export interface GroupEntry {
  readonly keyValues: unknown[];
  /** The value in the state store: the key values, then the aggregate buffers (null: new). */
  stored: readonly unknown[] | null;
  /** The state store key, built once per group. */
  encoded: string | null;
  /** The batch that last touched the group. */
  touched: number;
}

/**
 * Spark's whole-stage code generation, for the hot loop of a streaming aggregation: the key
 * extraction and the buffer updates of one plan compiled into one function, with column reads
 * (`row[3]`), tumbling windows and count/sum/min/max/avg of a column inlined, and every other
 * expression or aggregate called as its compiled closure. Results are the interpreted ones': the
 * batch is aggregated on its own, then merged with the stored buffers, in Spark's order.
 */
export interface GroupKernel {
  newEntry(keyValues: unknown[]): GroupEntry;
  /** Fresh partial buffers: the group's first row of a batch. */
  resetPartials(entry: GroupEntry): void;
  /** Folds one row into the group's partial buffers. */
  update(entry: GroupEntry, row: Row): void;
  /** The group's next stored value: key values, then stored buffers merged with this batch's. */
  nextStoredValue(entry: GroupEntry): unknown[];
  /**
   * Folds each row into its group; `touch` returns the group, ready for this batch, or null when
   * the row is to be dropped (late). Null when a key expands into several groups per row.
   */
  readonly consume: ((rows: readonly Row[], scratch: unknown[], touch: (key: unknown[]) => GroupEntry | null) => void) | null;
  /** The generated source, for tests and explain. */
  readonly source: string;
}

type Inline =
  | { readonly kind: 'countStar' }
  | { readonly kind: 'count' | 'sum' | 'min' | 'max' | 'avg'; readonly ordinal: number }
  | { readonly kind: 'generic' };

const NUMERIC = new Set(['int', 'long', 'double', 'timestamp']);

function inlineOf(a: BoundAggregate): Inline {
  if (a.distinct) return { kind: 'generic' };
  if (a.fn === 'count' && a.args.length === 0) return { kind: 'countStar' };
  const arg = a.args[0];
  if (a.args.length !== 1 || arg === undefined || arg.kind !== 'ref' || arg.path.length !== 0) return { kind: 'generic' };
  if (a.fn === 'count') return { kind: 'count', ordinal: arg.ordinal };
  if (typeof arg.type !== 'string' || !NUMERIC.has(arg.type)) return { kind: 'generic' };
  if (a.fn === 'sum' || a.fn === 'min' || a.fn === 'max') return { kind: a.fn, ordinal: arg.ordinal };
  if (a.fn === 'avg' && arg.type !== 'timestamp') return { kind: 'avg', ordinal: arg.ordinal };
  return { kind: 'generic' };
}

/** Spark's merge of two nullable sums / the better of two nullable extremes, as the closures do. */
const helpers = {
  mergeSum: (s: number | null, p: number | null): number | null => (p === null ? s : s === null ? p : s + p),
  pickMin: (s: unknown, p: unknown): unknown => (s === null ? p : p === null ? s : compareValues(p, s) < 0 ? p : s),
  pickMax: (s: unknown, p: unknown): unknown => (s === null ? p : p === null ? s : compareValues(p, s) > 0 ? p : s),
};

export function compileGroupKernel(
  boundKeys: readonly BoundExpr[],
  keyEvals: readonly (Evaluator | null)[],
  dropsNull: readonly boolean[],
  aggregates: readonly BoundAggregate[],
  functions: readonly AggregateFunction[],
): GroupKernel {
  const K = boundKeys.length;
  const inlines = aggregates.map(inlineOf);
  const fields: string[] = [];
  const reset: string[] = [];
  const update: string[] = [];
  const merged: string[] = [];
  inlines.forEach((a, j) => {
    const stored = `s[${K + j}]`;
    const read = a.kind !== 'countStar' && a.kind !== 'generic' ? `const v = row[${a.ordinal}]; if (v !== null && v !== undefined) ` : '';
    switch (a.kind) {
      case 'countStar':
      case 'count':
        fields.push(`this.p${j} = 0;`);
        reset.push(`e.p${j} = 0;`);
        update.push(`{ ${read}e.p${j} += 1; }`);
        merged.push(`s === null ? e.p${j} : ${stored} + e.p${j}`);
        break;
      case 'sum':
      case 'min':
      case 'max': {
        // A number field plus whether it is set: the field keeps a double representation.
        fields.push(`this.p${j} = 0; this.q${j} = false;`);
        reset.push(`e.p${j} = 0; e.q${j} = false;`);
        const fold = a.kind === 'sum' ? `e.p${j} += v;` : `if (v ${a.kind === 'min' ? '<' : '>'} e.p${j}) e.p${j} = v;`;
        update.push(`{ ${read}{ if (e.q${j}) { ${fold} } else { e.p${j} = v; e.q${j} = true; } } }`);
        const partial = `(e.q${j} ? e.p${j} : null)`;
        const merge = a.kind === 'sum' ? 'mergeSum' : a.kind === 'min' ? 'pickMin' : 'pickMax';
        merged.push(`s === null ? ${partial} : h.${merge}(${stored}, ${partial})`);
        break;
      }
      case 'avg':
        fields.push(`this.p${j} = 0; this.c${j} = 0;`);
        reset.push(`e.p${j} = 0; e.c${j} = 0;`);
        update.push(`{ ${read}{ e.p${j} += v; e.c${j} += 1; } }`);
        merged.push(`s === null ? [e.p${j}, e.c${j}] : [${stored}[0] + e.p${j}, ${stored}[1] + e.c${j}]`);
        break;
      case 'generic':
        fields.push(`this.p${j} = f[${j}].initial();`);
        reset.push(`e.p${j} = f[${j}].initial();`);
        update.push(`e.p${j} = f[${j}].update(e.p${j}, row);`);
        merged.push(`s === null ? e.p${j} : f[${j}].merge(${stored}, e.p${j})`);
        break;
    }
  });
  const keyValues = Array.from({ length: K }, (_, i) => `k[${i}]`);

  const consume = boundKeys.every((k) => !isExpandingKey(k)) ? consumeLoop(boundKeys, dropsNull, update) : '';
  const source = `
class GroupEntry {
  constructor(keyValues) { this.keyValues = keyValues; this.stored = null; this.encoded = null; this.touched = 0; ${fields.join(' ')} }
}
const newEntry = (keyValues) => new GroupEntry(keyValues);
const resetPartials = (e) => { ${reset.join(' ')} };
const update = (e, row) => { ${update.join('\n  ')} };
const nextStoredValue = (e) => { const s = e.stored; const k = e.keyValues; return [${[...keyValues, ...merged].join(', ')}]; };
${consume}
return { newEntry, resetPartials, update, nextStoredValue, consume: ${consume === '' ? 'null' : 'consume'} };`;
  return { ...builderFor(source)(functions, helpers, keyEvals), source };
}

type KernelBuilder = (f: readonly AggregateFunction[], h: typeof helpers, kf: readonly (Evaluator | null)[]) => Omit<GroupKernel, 'source'>;

/**
 * One compiled builder per distinct source, as Spark caches generated classes: queries of the
 * same shape (a restart, a test suite, a warm Lambda container) share the JIT's work on it.
 */
const builders = new Map<string, KernelBuilder>();

function builderFor(source: string): KernelBuilder {
  let build = builders.get(source);
  if (build === undefined) {
    // Only ordinals and numbers from the bound plan are spliced into the source; every value
    // (closures, functions, helpers) is passed in as an argument.
    build = new Function('f', 'h', 'kf', source) as KernelBuilder;
    if (builders.size >= 256) builders.delete(builders.keys().next().value!);
    builders.set(source, build);
  }
  return build;
}

function isExpandingKey(k: BoundExpr): boolean {
  return (k.kind === 'call' && k.fn === 'explode') || (k.kind === 'timeWindow' && k.slideMicros !== k.windowMicros);
}

/** The per-row loop: each key into `scratch` (a NULL window time drops the row), then the updates. */
function consumeLoop(boundKeys: readonly BoundExpr[], dropsNull: readonly boolean[], update: readonly string[]): string {
  const state: string[] = [];
  const keys = boundKeys.map((k, i) => {
    if (k.kind === 'ref' && k.path.length === 0) return `scratch[${i}] = row[${k.ordinal}] ?? null;`;
    if (k.kind === 'timeWindow' && k.time.kind === 'ref' && k.time.path.length === 0 && k.time.type === 'timestamp') {
      // Consecutive rows mostly share a window: they share its (never mutated) struct.
      state.push(`let windowStart${i} = NaN; let window${i} = null;`);
      return `{
      const t = row[${k.time.ordinal}];
      if (t === null || t === undefined) continue;
      let r = (t - ${k.startMicros}) % ${k.windowMicros};
      if (r < 0) r += ${k.windowMicros};
      const start = t - r;
      if (start !== windowStart${i}) { windowStart${i} = start; window${i} = { start, end: start + ${k.windowMicros} }; }
      scratch[${i}] = window${i};
    }`;
    }
    return dropsNull[i]
      ? `{ const v = kf[${i}](row); if (v === null) continue; scratch[${i}] = v; }`
      : `scratch[${i}] = kf[${i}](row);`;
  });
  return `${state.join('\n')}
const consume = (rows, scratch, touch) => {
  for (let r = 0; r < rows.length; r++) {
    const row = rows[r];
    ${keys.join('\n    ')}
    const e = touch(scratch);
    if (e === null) continue;
    ${update.join('\n    ')}
  }
};`;
}
