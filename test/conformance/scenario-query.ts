/** Translates a conformance scenario's engine-neutral query into Sluice DataFrame calls. */
import { SluiceSession } from '../../lib/api/session.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { Column, interval } from '../../lib/plan/column.js';
import * as F from '../../lib/plan/functions.js';
import { parseDataType, type DataType } from '../../lib/plan/data-types.js';
import { parseTimestamp } from '../../lib/core/timestamps.js';
import { parseDate } from '../../lib/core/dates.js';
import { parseDecimal, toPrecision } from '../../lib/core/decimal.js';
import type { AggregateFunctionName, Expr } from '../../lib/plan/expressions.js';
import type { MemoryStream } from '../../lib/sources/memory-stream.js';
import type { KeyValueGroupedDataFrame } from '../../lib/api/key-value-grouped.js';
import { GROUP_FUNCTIONS, PROCESSORS } from './stateful-processors.js';

export type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

export class UnsupportedScenario extends Error {}

const AGGREGATES = new Set(['count', 'sum', 'avg', 'min', 'max', 'first', 'last', 'collect_list', 'collect_set', 'approx_count_distinct']);

/** Converts a scenario value to Sluice's representation for a column of type `t`. */
export function toEngineValue(v: Json, t: DataType): unknown {
  if (v === null || v === undefined) return null;
  if (typeof v === 'object' && !Array.isArray(v) && '$ts' in v) {
    const micros = parseTimestamp(v.$ts);
    return micros === null ? null : micros + (v.offsetMs ?? 0) * 1000;
  }
  if (t === 'timestamp' && typeof v === 'number') return v * 1_000_000;
  if (t === 'timestamp' && typeof v === 'string') return parseTimestamp(v);
  if (t === 'date' && typeof v === 'string') return parseDate(v);
  if (typeof t === 'object' && t.kind === 'map' && typeof v === 'object') return new Map(Object.entries(v).map(([k, x]) => [k, toEngineValue(x, t.value)]));
  if (typeof t === 'object' && t.kind === 'decimal') return toPrecision(parseDecimal(String(v))!, t.precision, t.scale);
  if (typeof t === 'object' && t.kind === 'array' && Array.isArray(v)) return v.map((x) => toEngineValue(x, t.element));
  if (typeof t === 'object' && t.kind === 'struct' && typeof v === 'object') {
    return Object.fromEntries(t.fields.map((f) => [f.name, toEngineValue(v[f.name], f.type)]));
  }
  return v;
}

export function expr(e: Json): Column {
  if (e === null || e === undefined) throw new UnsupportedScenario('missing expression');
  if ('expr' in e && 'as' in e) return expr(e.expr).alias(e.as);
  if ('col' in e) return new Column({ kind: 'column', name: e.qualifier ? `${e.qualifier}.${e.col}` : e.col });
  if ('lit' in e) return F.lit(e.lit);
  if ('py' in e) return F.lit(e.py); // spark-diff: a plain argument PySpark takes as a Python value
  if ('interval' in e) return new Column({ kind: 'literal', value: interval(e.interval).micros, type: 'interval' });
  if ('star' in e) return new Column({ kind: 'star' });
  if ('sql' in e) return F.expr(e.sql as string);
  if ('fn' in e) return call(e);
  throw new UnsupportedScenario(`unknown expression ${JSON.stringify(e)}`);
}

function call(e: Json): Column {
  const args: Json[] = e.args ?? [];
  const a = (i: number): Column => expr(args[i]);
  switch (e.fn) {
    case 'cast':
      return a(0).cast(parseDataType(e.to));
    case 'case': {
      const branches = e.when as Json[];
      let c = F.when(expr(branches[0][0]), expr(branches[0][1]));
      for (const [cond, val] of branches.slice(1)) c = c.when(expr(cond), expr(val));
      return e.else !== undefined && e.else !== null ? c.otherwise(expr(e.else)) : c;
    }
    case 'window':
      return F.window(a(0), e.duration, e.slide, e.startTime);
    case 'session_window':
      return F.session_window(a(0), typeof e.gap === 'string' ? e.gap : expr(e.gap));
    case 'between':
      return a(0).between(a(1), a(2));
    default:
      if (AGGREGATES.has(e.fn)) {
        const isStar = args.length === 0 || (args.length === 1 && args[0].star);
        return new Column({
          kind: 'aggregate',
          fn: e.fn as AggregateFunctionName,
          args: isStar ? [] : args.map((x) => expr(x).expr),
          distinct: Boolean(e.distinct),
          ignoreNulls: Boolean(e.ignoreNulls),
        });
      }
      return new Column({ kind: 'call', fn: e.fn, args: args.map((x) => expr(x).expr) } as Expr);
  }
}

export interface ScenarioInputs {
  readonly session: SluiceSession;
  readonly streams: Map<string, MemoryStream>;
  readonly frames: Map<string, DataFrame>;
  readonly types: Map<string, DataType[]>;
}

export function buildInputs(scenario: Json, conf: Record<string, string>): ScenarioInputs {
  const session = new SluiceSession(conf);
  const streams = new Map<string, MemoryStream>();
  const frames = new Map<string, DataFrame>();
  const types = new Map<string, DataType[]>();
  for (const input of scenario.inputs as Json[]) {
    const schema = (input.schema as Json[]).map((f) => ({ name: f.name, type: parseDataType(f.type) }));
    types.set(input.name, schema.map((f) => f.type));
    if (input.kind === 'stream') {
      const { stream, df } = session.memoryStream(schema, input.name);
      streams.set(input.name, stream);
      frames.set(input.name, df);
    } else {
      const rows = (input.rows as Json[][]).map((r) => r.map((v, i) => toEngineValue(v, schema[i]!.type)));
      frames.set(input.name, session.createDataFrame(rows, schema, input.name));
    }
  }
  return { session, streams, frames, types };
}

export function buildQuery(ops: Json[], inputs: ScenarioInputs): DataFrame {
  let df: DataFrame | null = null;
  let grouping: Column[] | null = null;
  let groupedByKey: KeyValueGroupedDataFrame<DataFrame> | null = null;
  const keyed = (): KeyValueGroupedDataFrame<DataFrame> => {
    if (!groupedByKey) throw new UnsupportedScenario('a stateful processing op needs groupByKey first');
    return groupedByKey;
  };
  const named = <T>(registry: Record<string, T>, name: string): T => {
    const found = registry[name];
    if (!found) throw new UnsupportedScenario(`unknown processor or function '${name}'`);
    return found;
  };
  for (const op of ops) {
    const current = (): DataFrame => {
      if (!df) throw new UnsupportedScenario('query must start with a source');
      return df;
    };
    switch (op.op) {
      case 'source': {
        const f = inputs.frames.get(op.input);
        if (!f) throw new UnsupportedScenario(`unknown input ${op.input}`);
        df = f;
        break;
      }
      case 'select':
        df = current().select(...(op.exprs as Json[]).map(expr));
        break;
      case 'withColumn':
        df = current().withColumn(op.name, expr(op.expr));
        break;
      case 'withColumnRenamed':
        df = current().withColumnRenamed(op.from, op.to);
        break;
      case 'filter':
        df = current().filter(op.sql !== undefined ? (op.sql as string) : expr(op.expr));
        break;
      case 'selectExpr':
        df = current().selectExpr(...(op.exprs as string[]));
        break;
      case 'createTempView':
        current().createOrReplaceTempView(op.name);
        break;
      case 'sql':
        df = inputs.session.sql(op.query);
        break;
      case 'withWatermark':
        df = current().withWatermark(op.column, op.delay);
        break;
      case 'groupBy':
        grouping = (op.keys as Json[]).map(expr);
        break;
      case 'agg':
        df = current().groupBy(...(grouping ?? [])).agg(...(op.aggs as Json[]).map(expr));
        grouping = null;
        break;
      case 'dropDuplicates':
        df = current().dropDuplicates(op.columns ?? undefined);
        break;
      case 'dropDuplicatesWithinWatermark':
        df = current().dropDuplicatesWithinWatermark(op.columns ?? undefined);
        break;
      case 'orderBy':
        df = current().orderBy(...(op.keys as Json[]).map((k) => (k.desc ? expr(k.expr).desc() : expr(k.expr).asc())));
        break;
      case 'join': {
        let left = current();
        let right = buildQuery(op.right, inputs);
        if (op.leftAs) left = left.as(op.leftAs);
        if (op.rightAs) right = right.as(op.rightAs);
        const on = op.using ? op.using : op.on ? expr(op.on) : null;
        df = left.join(right, on, op.type);
        break;
      }
      case 'union':
        df = current().union(buildQuery(op.other, inputs));
        break;
      case 'intersect':
        df = current().intersect(buildQuery(op.other, inputs), Boolean(op.all));
        break;
      case 'except':
        df = current().except(buildQuery(op.other, inputs), Boolean(op.all));
        break;
      case 'windowFunction':
        df = current().withWindowFunction(
          op.as,
          op.fn,
          (op.partitionBy ?? []).map(expr),
          (op.orderBy ?? []).map((k: Json) => ('expr' in k && !('as' in k) ? (k.desc ? expr(k.expr).desc() : expr(k.expr).asc()) : expr(k))),
        );
        break;
      case 'sample':
        df = current().sample(op.fraction, op.seed);
        break;
      case 'groupByKey':
        groupedByKey = current().groupByKey(...(op.keys as string[]));
        break;
      case 'transformWithState': {
        const initial = op.initialState ? inputs.frames.get(op.initialState.input)!.groupByKey(...(op.initialState.keys as string[])) : undefined;
        df = keyed().transformWithState(named(PROCESSORS, op.processor), {
          outputSchema: op.outputSchema, timeMode: op.timeMode, outputMode: op.outputMode, ...(initial ? { initialState: initial } : {}),
        });
        break;
      }
      case 'flatMapGroupsWithState':
        df = keyed().flatMapGroupsWithState(named(GROUP_FUNCTIONS, op.function), {
          outputSchema: op.outputSchema, outputMode: op.outputMode, timeout: op.timeout, ...(op.stateSchema ? { stateSchema: op.stateSchema } : {}),
        });
        break;
      case 'mapGroupsWithState': {
        const fn = named(GROUP_FUNCTIONS, op.function);
        df = keyed().mapGroupsWithState<number>((key, rows, state) => [...fn(key, rows, state)][0]!, {
          outputSchema: op.outputSchema, timeout: op.timeout, ...(op.stateSchema ? { stateSchema: op.stateSchema } : {}),
        });
        break;
      }
      case 'failOnce':
        df = current().failOnce(expr(op.condition), op.message ?? 'injected failure');
        break;
      default:
        throw new UnsupportedScenario(`op '${op.op}' is not supported by Sluice`);
    }
  }
  if (!df) throw new UnsupportedScenario('empty query');
  return df;
}
