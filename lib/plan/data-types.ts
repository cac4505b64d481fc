/** Spark SQL data types that Sluice supports. Primitive types are strings; complex ones are objects. */
export type PrimitiveType =
  | 'int'
  | 'long'
  | 'double'
  | 'string'
  | 'boolean'
  | 'timestamp'
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

export type DataType = PrimitiveType | ArrayType | StructType;

export const arrayOf = (element: DataType): ArrayType => ({ kind: 'array', element });
export const structOf = (fields: readonly StructField[]): StructType => ({ kind: 'struct', fields });

/** The struct `window()` and `session_window()` produce: `{start, end}` timestamps. */
export const WINDOW_STRUCT: StructType = structOf([
  { name: 'start', type: 'timestamp' },
  { name: 'end', type: 'timestamp' },
]);

export function isNumeric(t: DataType): boolean {
  return t === 'int' || t === 'long' || t === 'double';
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
  return `struct<${t.fields.map((f) => `${f.name}:${typeToString(f.type)}`).join(',')}>`;
}

/** Parses `int`, `bigint`, `array<int>`, `struct<a:int,b:string>` (Spark's simple type strings). */
export function parseDataType(text: string): DataType {
  const s = text.trim().toLowerCase();
  const aliases: Record<string, PrimitiveType> = {
    int: 'int', integer: 'int', long: 'long', bigint: 'long', double: 'double', float: 'double',
    string: 'string', boolean: 'boolean', bool: 'boolean', timestamp: 'timestamp', null: 'null',
  };
  if (s in aliases) return aliases[s]!;
  if (s.startsWith('array<') && s.endsWith('>')) return arrayOf(parseDataType(s.slice(6, -1)));
  if (s.startsWith('struct<') && s.endsWith('>')) {
    return structOf(splitTopLevel(text.trim().slice(7, -1)).map((part) => {
      const colon = part.indexOf(':');
      if (colon < 0) throw new Error(`Malformed struct field '${part}' in type '${text}'`);
      return { name: part.slice(0, colon).trim(), type: parseDataType(part.slice(colon + 1)) };
    }));
  }
  throw new Error(`Unknown data type '${text}'. Supported: int, long, double, string, boolean, timestamp, array<T>, struct<name:T,...>`);
}

function splitTopLevel(s: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '<') depth++;
    else if (c === '>') depth--;
    else if (c === ',' && depth === 0) {
      parts.push(s.slice(start, i));
      start = i + 1;
    }
  }
  if (s.slice(start).trim()) parts.push(s.slice(start));
  return parts;
}
