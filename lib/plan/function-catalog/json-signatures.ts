import { AnalysisError } from '../../errors/sluice-error.js';
import { arrayOf, isArray, isStruct, parseDataType, splitTopLevel, structOf, type DataType } from '../data-types.js';
import { argumentTypeError } from './errors.js';
import type { ScalarFunctionSignature } from './signature.js';
import { literalOf, requireStrings } from './type-rules.js';

/**
 * A from_json schema: a DDL field list (`a INT, b STRING`) or a type string (`struct<a:int>`,
 * `array<struct<...>>`), as Spark's DataType.fromDDL reads both.
 */
export function parseSchemaString(text: string): DataType {
  const s = text.trim();
  if (/^(struct|array|map)\s*</i.test(s)) return parseDataType(s);
  const fields = splitTopLevel(s).map((part) => {
    const m = /^\s*(`[^`]+`|[A-Za-z_][\w]*)\s*:?\s+(.+?)\s*(NOT\s+NULL)?\s*$/i.exec(part);
    if (!m) throw new AnalysisError(`[PARSE_SYNTAX_ERROR] Syntax error in the schema '${text}' at '${part.trim()}'.`, { code: 'PARSE_SYNTAX_ERROR', errorClass: 'PARSE_SYNTAX_ERROR' });
    return { name: m[1]!.replace(/^`|`$/g, ''), type: parseDataType(m[2]!) };
  });
  return structOf(fields);
}

/** Signatures of JSON functions (implementations: lib/execution/functions/json-functions.ts). */
export const JSON_SIGNATURES: readonly ScalarFunctionSignature[] = [
  {
    name: 'from_json', minArgs: 2, maxArgs: 2,
    resultType: (args) => {
      requireStrings('from_json', args, 0, 1);
      const schema = literalOf(args, 1);
      if (typeof schema !== 'string') {
        throw new AnalysisError('[INVALID_SCHEMA.NON_STRING_LITERAL] The input schema is not a valid schema string: it must be a string literal.', { code: 'INVALID_SCHEMA', errorClass: 'INVALID_SCHEMA.NON_STRING_LITERAL' });
      }
      const t = parseSchemaString(schema);
      if (!isStruct(t) && !isArray(t)) throw new AnalysisError(`[DATATYPE_MISMATCH.INVALID_JSON_SCHEMA] Input schema "${schema}" must be a struct or an array.`, { code: 'DATATYPE_MISMATCH', errorClass: 'DATATYPE_MISMATCH.INVALID_JSON_SCHEMA' });
      return t;
    },
  },
  {
    name: 'to_json', minArgs: 1, maxArgs: 1,
    resultType: (args) => {
      const t = args[0]!.type;
      if (!isStruct(t) && !isArray(t)) throw argumentTypeError('to_json', 0, t, '"STRUCT" or "ARRAY" or "MAP"');
      return 'string';
    },
  },
  { name: 'get_json_object', minArgs: 2, maxArgs: 2, resultType: (args) => { requireStrings('get_json_object', args); return 'string'; } },
  { name: 'json_array_length', minArgs: 1, maxArgs: 1, resultType: (args) => { requireStrings('json_array_length', args); return 'int'; } },
  { name: 'json_object_keys', minArgs: 1, maxArgs: 1, resultType: (args) => { requireStrings('json_object_keys', args); return arrayOf('string'); } },
];
