/** Spark SQL data types that Sluice supports. Primitive types are strings; complex ones are objects. */
export type PrimitiveType =
  | 'int'
  | 'long'
  | 'double'
  | 'string'
  | 'boolean'
  | 'timestamp'
  | 'date'
  | 'binary'
  | 'interval'
  | 'null';

export interface ArrayType {
  readonly kind: 'array';
  readonly element: DataType;
}

export interface StructField {
  readonly name: string;
  readonly type: DataType;
}

export interface StructType {
  readonly kind: 'struct';
  readonly fields: readonly StructField[];
}

/** Spark's decimal(precision, scale): values are lib/core/decimal.ts's `Decimal` (exact, bigint-scaled). */
export interface DecimalType {
  readonly kind: 'decimal';
  readonly precision: number;
  readonly scale: number;
}

/** Spark's map<key, value>: values are JS `Map`s (insertion order, as Spark keeps entries). */
export interface MapType {
  readonly kind: 'map';
  readonly key: DataType;
  readonly value: DataType;
}

/**
 * Engine values by type: int/long/double numbers (a long beyond 2^53 a bigint), timestamp epoch
 * microseconds, date days since the epoch (a number), decimal a `Decimal`, binary a `Uint8Array`,
 * map a `Map`, array a JS array, struct a plain object.
 */
export type DataType = PrimitiveType | ArrayType | StructType | DecimalType | MapType;

export const arrayOf = (element: DataType): ArrayType => ({ kind: 'array', element });
export const structOf = (fields: readonly StructField[]): StructType => ({ kind: 'struct', fields });
export const decimalOf = (precision: number, scale: number): DecimalType => ({ kind: 'decimal', precision, scale });
export const mapOf = (key: DataType, value: DataType): MapType => ({ kind: 'map', key, value });
/** Spark's default `decimal` is decimal(10, 0). */
export const DEFAULT_DECIMAL: DecimalType = decimalOf(10, 0);

/** The struct `window()` and `session_window()` produce: `{start, end}` timestamps. */
export const WINDOW_STRUCT: StructType = structOf([
  { name: 'start', type: 'timestamp' },
  { name: 'end', type: 'timestamp' },
]);

export function isNumeric(t: DataType): boolean {
  return t === 'int' || t === 'long' || t === 'double' || isDecimal(t);
}

export function isDecimal(t: DataType): t is DecimalType {
  return typeof t === 'object' && t.kind === 'decimal';
}

export function isMap(t: DataType): t is MapType {
  return typeof t === 'object' && t.kind === 'map';
}

export function isStruct(t: DataType): t is StructType {
  return typeof t === 'object' && t.kind === 'struct';
}

export function isArray(t: DataType): t is ArrayType {
  return typeof t === 'object' && t.kind === 'array';
}

export function typeToString(t: DataType): string {
  if (typeof t === 'string') return t;
  if (t.kind === 'array') return `array<${typeToString(t.element)}>`;
  if (t.kind === 'decimal') return `decimal(${t.precision},${t.scale})`;
  if (t.kind === 'map') return `map<${typeToString(t.key)},${typeToString(t.value)}>`;
  return `struct<${t.fields.map((f) => `${f.name}:${typeToString(f.type)}`).join(',')}>`;
}

/** Spark's error for a type name it does not know (UNSUPPORTED_DATATYPE). */
export class UnknownDataTypeError extends Error {
  constructor(readonly typeText: string, message?: string) {
    super(message ?? `[UNSUPPORTED_DATATYPE] Unsupported data type "${typeText.toUpperCase()}".`);
  }
}

const PRIMITIVE_ALIASES: Readonly<Record<string, PrimitiveType>> = {
  int: 'int', integer: 'int', long: 'long', bigint: 'long', double: 'double', float: 'double',
  string: 'string', boolean: 'boolean', bool: 'boolean', timestamp: 'timestamp', null: 'null',
  date: 'date', binary: 'binary',
  // Spark's narrower integers are held as ints here (same values, same arithmetic up to overflow).
  smallint: 'int', short: 'int', tinyint: 'int', byte: 'int',
};

/**
 * Parses Spark's type strings: `int`, `bigint`, `date`, `decimal(10,2)`, `array<int>`,
 * `map<string,int>`, `struct<a:int,b:string>`.
 */
export function parseDataType(text: string): DataType {
  const s = text.trim().toLowerCase();
  if (s in PRIMITIVE_ALIASES) return PRIMITIVE_ALIASES[s]!;
  const decimal = /^(?:decimal|dec|numeric)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?$/.exec(s);
  if (decimal) return parseDecimalType(text, decimal[1], decimal[2]);
  if (s.startsWith('array<') && s.endsWith('>')) return arrayOf(parseDataType(text.trim().slice(6, -1)));
  if (s.startsWith('map<') && s.endsWith('>')) {
    const parts = splitTopLevel(text.trim().slice(4, -1));
    if (parts.length !== 2) throw new UnknownDataTypeError(text.trim(), `Malformed map type '${text.trim()}': expected map<keyType,valueType>`);
    return mapOf(parseDataType(parts[0]!), parseDataType(parts[1]!));
  }
  if (s.startsWith('struct<') && s.endsWith('>')) {
    return structOf(splitTopLevel(text.trim().slice(7, -1)).map((part) => {
      const colon = part.indexOf(':');
      if (colon < 0) throw new Error(`Malformed struct field '${part}' in type '${text}'`);
      return { name: part.slice(0, colon).trim(), type: parseDataType(part.slice(colon + 1)) };
    }));
  }
  throw new UnknownDataTypeError(text.trim());
}

function parseDecimalType(text: string, precisionText: string | undefined, scaleText: string | undefined): DecimalType {
  if (precisionText === undefined) return DEFAULT_DECIMAL;
  const precision = Number(precisionText);
  const scale = Number(scaleText ?? '0');
  if (precision < 1 || precision > 38) {
    throw new UnknownDataTypeError(text.trim(), `[DECIMAL_PRECISION_EXCEEDS_MAX_PRECISION] Decimal precision ${precision} exceeds max precision 38 (at least 1) in '${text.trim()}'.`);
  }
  if (scale > precision) {
    throw new UnknownDataTypeError(text.trim(), `Decimal scale (${scale}) cannot be greater than precision (${precision}) in '${text.trim()}'.`);
  }
  return decimalOf(precision, scale);
}

/** A part of a type or field list, with where it starts in the text (for error positions). */
export interface TopLevelPart {
  readonly text: string;
  readonly start: number;
}

/**
 * Splits a type or field list at its top-level commas (`a int, m map<string,int>` gives two
 * parts), the one splitter the DDL readers share. A blank last part (a trailing comma) is dropped;
 * blank inner parts are kept so each caller decides whether they are an error.
 */
export function splitTopLevelParts(s: string): TopLevelPart[] {
  const parts: TopLevelPart[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '<' || c === '(') depth++;
    else if (c === '>' || c === ')') depth--;
    else if (c === ',' && depth === 0) {
      parts.push({ text: s.slice(start, i), start });
      start = i + 1;
    }
  }
  if (s.slice(start).trim()) parts.push({ text: s.slice(start), start });
  return parts;
}

export function splitTopLevel(s: string): string[] {
  return splitTopLevelParts(s).map((part) => part.text);
}
