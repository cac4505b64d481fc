import { parseDataType, type StructField } from '../plan/data-types.js';

export type SchemaLike = readonly StructField[] | readonly { name: string; type: string }[] | string;

/** `"user string, amount double, ts timestamp"` or a field list. */
export function toSchema(schema: SchemaLike): StructField[] {
  if (typeof schema === 'string') {
    return splitFields(schema).map((part) => {
      const [name, ...type] = part.trim().split(/\s+/);
      return { name: name!, type: parseDataType(type.join(' ')) };
    });
  }
  return schema.map((f) => ({ name: f.name, type: typeof f.type === 'string' ? parseDataType(f.type) : f.type }));
}

function splitFields(s: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '<') depth++;
    else if (s[i] === '>') depth--;
    else if (s[i] === ',' && depth === 0) {
      out.push(s.slice(start, i));
      start = i + 1;
    }
  }
  out.push(s.slice(start));
  return out.filter((x) => x.trim());
}
