import { AnalysisError } from '../errors/sluice-error.js';
import { parseDataType, splitTopLevelParts, UnknownDataTypeError, type StructField } from '../plan/data-types.js';

export type SchemaLike = readonly StructField[] | readonly { name: string; type: string }[] | string;

/** `"user string, amount double, ts timestamp"` or a field list. */
export function toSchema(schema: SchemaLike): StructField[] {
  if (typeof schema === 'string') {
    return splitTopLevelParts(schema).filter((part) => part.text.trim()).map(({ text, start }) => {
      const name = /^\s*(\S+)/.exec(text)![1]!;
      const nameEnd = text.indexOf(name) + name.length;
      const typeText = text.slice(nameEnd);
      const typeStart = start + nameEnd + (typeText.length - typeText.trimStart().length);
      return { name, type: fieldType(schema, name, typeText, typeStart) };
    });
  }
  return schema.map((f) => ({ name: f.name, type: typeof f.type === 'string' ? parseDataType(f.type) : f.type }));
}

/**
 * A field's type; an unknown one names the field and its position (0-based, as Spark's
 * `== SQL (line 1, position N) ==`) in the schema string, with Spark's UNSUPPORTED_DATATYPE class.
 */
function fieldType(schema: string, name: string, typeText: string, position: number) {
  if (typeText.trim() === '') {
    throw new AnalysisError(`Missing data type for field '${name}' at position ${position} in '${schema}'`, { code: 'PARSE_SYNTAX_ERROR', errorClass: 'PARSE_SYNTAX_ERROR' });
  }
  try {
    return parseDataType(typeText);
  } catch (error) {
    if (!(error instanceof UnknownDataTypeError)) throw error;
    throw new AnalysisError(
      `Unknown data type '${error.typeText}' for field '${name}' at position ${position} in '${schema}' (${error.message.replace(/\.$/, '')})`,
      { code: 'UNSUPPORTED_DATATYPE', errorClass: 'UNSUPPORTED_DATATYPE', hint: 'use int, long, double, string, boolean, timestamp, date, binary, decimal(p,s), array<T>, map<K,V> or struct<...>.' },
    );
  }
}
