import type { DataType } from './data-types.js';

/**
 * A column of a plan node's output. `id` makes two columns with the same name distinct (self
 * joins); `eventTimeDelayMs` marks the column `withWatermark` declared (Spark keeps this in the
 * attribute's metadata, so it survives projections, aliases and `window()`).
 */
export interface Attribute {
  readonly id: number;
  readonly name: string;
  readonly type: DataType;
  readonly qualifier: string | null;
  readonly eventTimeDelayMs: number | null;
}

let nextAttributeId = 1;

export function newAttribute(
  name: string,
  type: DataType,
  extra: { qualifier?: string | null; eventTimeDelayMs?: number | null } = {},
): Attribute {
  return Object.freeze({
    id: nextAttributeId++,
    name,
    type,
    qualifier: extra.qualifier ?? null,
    eventTimeDelayMs: extra.eventTimeDelayMs ?? null,
  });
}

export function withQualifier(a: Attribute, qualifier: string | null): Attribute {
  return Object.freeze({ ...a, qualifier });
}

export function isEventTime(a: Attribute): boolean {
  return a.eventTimeDelayMs !== null;
}
