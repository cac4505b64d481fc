/**
 * How arbitrary stateful operators lay their state out in one key-value state store (the same
 * store, versions and exactly-once commit as every other operator). Every value starts with the
 * grouping key's values, so resharding routes each entry by its key (lib/state/state-routing.ts).
 *
 *   v|<var>|<key>                [keyValues, value, expiresAtMs | null]           ValueState
 *   l|<var>|<key>                [keyValues, [[value, expiresAtMs | null], ...]]  ListState
 *   m|<var>|[<key>,<mapKey>]     [keyValues, mapKey, value, expiresAtMs | null]   MapState entry
 *   t|[<key>,<ms>]               [keyValues, ms]                                 a timer
 *   g|<key>                      [keyValues, state | null, timeoutMs | null]     GroupState
 *
 * `<key>` is the encoded grouping key (execution/values.ts encodeKey). TTL is Spark's: an entry
 * updated at batch timestamp T with ttl D expires once a batch's timestamp is >= T + D; expired
 * values are never read, and are removed at the end of the batch.
 */
export type Expiry = number | null;
export type StoredValue = readonly [keyValues: readonly unknown[], value: unknown, expiresAtMs: Expiry];
export type StoredList = readonly [keyValues: readonly unknown[], elements: readonly (readonly [unknown, Expiry])[]];
export type StoredMapEntry = readonly [keyValues: readonly unknown[], mapKey: unknown, value: unknown, expiresAtMs: Expiry];
export type StoredTimer = readonly [keyValues: readonly unknown[], expiryMs: number];
export type StoredGroup = readonly [keyValues: readonly unknown[], state: unknown, timeoutMs: number | null];

export const stateKeys = {
  value: (name: string, key: string): string => `v|${name}|${key}`,
  list: (name: string, key: string): string => `l|${name}|${key}`,
  mapEntry: (name: string, key: string, mapKey: string): string => `m|${name}|${JSON.stringify([key, mapKey])}`,
  timer: (key: string, ms: number): string => `t|${JSON.stringify([key, ms])}`,
  group: (key: string): string => `g|${key}`,
};

export function isExpired(expiresAtMs: Expiry, batchTimestampMs: number): boolean {
  return expiresAtMs !== null && batchTimestampMs >= expiresAtMs;
}
