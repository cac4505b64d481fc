/**
 * Which shard a state entry belongs to after a reshard. Kinesis routes a record by the MD5 of its
 * partition key, read as a 128-bit unsigned integer, into the hash-key range of one open shard;
 * the repartition stage routes rows to its internal stream the same way, by the MD5 of its routing
 * key. So a stateful operator's entry can follow its rows when its key holds that routing value:
 *
 * - one stage: the key column the stream is partitioned by (`source.partitionKey`), as
 *   the record's partition key is written (`String(value)`, as the decoder checks it);
 * - stage 2 of a repartition stage: the routing columns, as the repartition sink hashes them.
 *
 * Entries are read from the value where operators store their key values (aggregations and
 * session windows: `[keyValues, ...]`), else from the key (`encodeKey` of the key values:
 * deduplication; a stream-stream join's stores, `<encoded join key>` and `<encoded join key>#<index>`).
 * On the source stream a join's state can be merged, not split (its keys are not the stream's
 * partition key); through the hop it is routed by the join keys the hop routes by. A join key
 * holding a NULL compared with `=` never matches: its rows may sit in any shard, and a merge keeps
 * them all (`joinSide`).
 */
import { createHash } from 'node:crypto';
import { stringifyWithLongs } from '../core/long.js';
import { resolveName } from '../analysis/binder.js';
import { sourceColumnOf } from '../analysis/partitioning.js';
import { isStatefulOperator } from '../analysis/stateful-operators.js';
import { streamStreamJoinBounds } from '../analysis/streaming-join-helper.js';
import { unalias } from '../plan/expressions.js';
import { planChildren, type JoinNode, type LogicalPlan } from '../plan/logical-plan.js';
import type { StateStoreId } from './state-store.js';

/** Kinesis's routing: the MD5 of the partition key as a 128-bit unsigned number. */
export function kinesisHashKey(partitionKey: string): bigint {
  return BigInt(`0x${createHash('md5').update(partitionKey).digest('hex')}`);
}

/** A shard's hash-key range, both ends included (Kinesis's HashKeyRange). */
export interface HashKeyRange {
  readonly start: bigint;
  readonly end: bigint;
}

export function inHashKeyRange(hash: bigint, range: HashKeyRange): boolean {
  return hash >= range.start && hash <= range.end;
}

/** How an operator's state entries are routed, or why they cannot be. */
export interface StoreRouting {
  readonly id: StateStoreId;
  /** The routing key of one entry (hash it with kinesisHashKey), or null when not routable. */
  readonly routingKey: ((key: string, value: unknown) => string | null) | null;
  /** Why the store cannot be split by key (when `routingKey` is null). */
  readonly unroutable?: string;
  /**
   * A stream-stream join's store: with the other store of its side it holds one multimap (join
   * key → rows), merged together (`unionJoinSide`). `neverMatches` tells a key whose rows can never
   * match (a NULL compared with `=`): such rows do not follow their key's hash (a preserved side's
   * NULL-padded column sits where its row was routed), so merged parents may both hold the key.
   */
  readonly joinSide?: {
    readonly side: string;
    readonly part: 'counts' | 'rows';
    readonly neverMatches: (keyValues: readonly unknown[]) => boolean;
  };
}

/** Where the routing value sits among an operator's key values, per operator kind. */
type KeyPositions = { readonly positions: readonly number[] } | { readonly unroutable: string };

/** Every state store of a stage's plan, in operator-id order (the planner's pre-order). */
export function stateStoresOf(plan: LogicalPlan): { operatorId: number; node: LogicalPlan; stores: string[] }[] {
  const out: { operatorId: number; node: LogicalPlan; stores: string[] }[] = [];
  const visit = (p: LogicalPlan): void => {
    if (isStatefulOperator(p)) {
      const stores = p.kind === 'Join'
        ? ['left', 'right'].flatMap((side) => [`${side}-keyToNumValues`, `${side}-keyWithIndexToValue`])
        : ['default'];
      out.push({ operatorId: out.length, node: p, stores });
    }
    planChildren(p).forEach(visit);
  };
  visit(plan);
  return out;
}

/** The source column a key expression of `node` copies unchanged, lower-cased, or null. */
function keySourceColumn(child: LogicalPlan, expr: Parameters<typeof unalias>[0]): string | null {
  const e = unalias(expr);
  if (e.kind !== 'column') return null;
  try {
    const resolved = resolveName(e.name, child.output);
    return resolved.path.length === 0 ? sourceColumnOf(child, resolved.attribute)?.toLowerCase() ?? null : null;
  } catch {
    return null;
  }
}

/** One stage: the position of the partition-key column among each operator's keys. */
function partitionKeyPositions(node: LogicalPlan, partitionKey: string | undefined): KeyPositions {
  const wanted = partitionKey?.toLowerCase();
  const notKeyed = `its keys do not include the stream's partition key${partitionKey ? ` '${partitionKey}'` : ' (none is declared)'}`;
  if (node.kind === 'Aggregate') {
    const i = wanted === undefined ? -1 : node.groupingExprs.findIndex((g) => keySourceColumn(node.child, g) === wanted);
    return i >= 0 ? { positions: [i] } : { unroutable: node.groupingExprs.length === 0 ? 'it is a global aggregation (no keys)' : notKeyed };
  }
  if (node.kind === 'Deduplicate' || node.kind === 'StatefulProcessing') {
    const i = wanted === undefined ? -1 : node.keys.findIndex((k) => sourceColumnOf(node.child, k)?.toLowerCase() === wanted);
    return i >= 0 ? { positions: [i] } : { unroutable: notKeyed };
  }
  return { unroutable: 'a stream-stream join\'s buffered rows are not stored by a routable key' };
}

/** Reads an entry's key values: from `[keyValues, ...]` values, else by decoding `encodeKey`. */
function keyValuesOf(key: string, value: unknown): readonly unknown[] | null {
  if (Array.isArray(value) && Array.isArray(value[0])) return value[0] as unknown[];
  return decodeKey(key);
}

/**
 * A join entry's join-key values, from its key alone (both stores decode the same way, so a key's
 * count and its rows always go to the same child): `<encoded key>#<index>` for the rows.
 */
function joinKeyValuesOf(storeName: string, key: string): readonly unknown[] | null {
  if (!storeName.endsWith('keyWithIndexToValue')) return decodeKey(key);
  const hash = key.lastIndexOf('#');
  return hash < 0 ? null : decodeKey(key.slice(0, hash));
}

/**
 * A number as encodeKey wrote it: a long beyond 2^53 back as its exact bigint (the canonical form
 * rows carry), so that routing hashes the digits the producer and the repartition sink hashed,
 * not the nearest double (which can hash into another child's range).
 */
function exactNumber(text: string): number | bigint {
  const n = Number(text);
  return /^-?\d+$/.test(text) && !Number.isSafeInteger(n) ? BigInt(text) : n;
}

/** The inverse of execution/values.ts `encodeKey`. */
export function decodeKey(key: string): unknown[] | null {
  if (key.startsWith('s')) return [key.slice(1)];
  if (key.startsWith('n')) return [exactNumber(key.slice(1))];
  try {
    const parsed = JSON.parse(key, (_k, v: unknown) => {
      const tagged = v as { '\u0000number'?: string } | null;
      return tagged !== null && typeof tagged === 'object' && typeof tagged['\u0000number'] === 'string' ? exactNumber(tagged['\u0000number']) : v;
    }) as unknown;
    return Array.isArray(parsed) ? parsed : null;
  } catch {
    return null;
  }
}

/** Whether a join's key values can never match: a NULL where the key is compared with `=` (not `<=>`). */
function joinNeverMatches(join: JoinNode): (keyValues: readonly unknown[]) => boolean {
  const nullSafe = streamStreamJoinBounds(join).split.keys.map((k) => k.nullSafe);
  return (keyValues) => keyValues.some((v, i) => (v === null || v === undefined) && nullSafe[i] !== true);
}

function routingFor(
  operatorId: number, node: LogicalPlan, stores: readonly string[], positions: KeyPositions, keyOf: (values: readonly unknown[]) => string | null,
): StoreRouting[] {
  const join = node.kind === 'Join';
  const neverMatches = join ? joinNeverMatches(node) : null;
  return stores.map((storeName) => {
    const id = { operatorId, storeName };
    const joinSide = neverMatches ? {
      joinSide: {
        side: storeName.slice(0, storeName.indexOf('-')),
        part: storeName.endsWith('keyWithIndexToValue') ? 'rows' as const : 'counts' as const,
        neverMatches,
      },
    } : {};
    if ('unroutable' in positions) return { id, routingKey: null, unroutable: positions.unroutable, ...joinSide };
    return {
      id,
      ...joinSide,
      routingKey: (key: string, value: unknown) => {
        const values = join ? joinKeyValuesOf(storeName, key) : keyValuesOf(key, value);
        return values === null ? null : keyOf(positions.positions.map((p) => values[p]));
      },
    };
  });
}

/** A one-stage query on the source stream: entries follow their partition-key column. */
export function sourceStreamStateRouting(plan: LogicalPlan, partitionKey: string | undefined): StoreRouting[] {
  return stateStoresOf(plan).flatMap(({ operatorId, node, stores }) => routingFor(
    operatorId, node, stores, partitionKeyPositions(node, partitionKey),
    ([v]) => (v === null || v === undefined ? null : String(v)),
  ));
}

/**
 * Stage 2 of a repartition stage: entries follow the routing columns, hashed as the repartition
 * sink hashes a row (`JSON.stringify` of the values, null for a missing one). `keyPositions` are
 * the routing columns' positions among the stateful operator's keys; `perOperator` (the hop's
 * `stateKeyPositions`), when given, each operator's own, in operator-id order: the sides of a split
 * join, the joins of a chain and an operator above a join hold the routed values at other positions.
 */
export function repartitionStateRouting(
  plan: LogicalPlan, keyPositions: readonly number[], unroutable?: string, perOperator?: readonly (readonly number[] | null)[],
): StoreRouting[] {
  const operators = stateStoresOf(plan);
  const routingOf = (operatorId: number, node: LogicalPlan, stores: readonly string[], positions: KeyPositions): StoreRouting[] =>
    routingFor(operatorId, node, stores, positions, (values) => repartitionRoutingKey(values));
  if (perOperator) {
    return operators.flatMap(({ operatorId, node, stores }) => {
      const positions = perOperator[operatorId];
      return routingOf(operatorId, node, stores, positions ? { positions } : { unroutable: unroutable ?? 'its keys do not hold the values its rows are routed by' });
    });
  }
  if (unroutable) return operators.flatMap(({ operatorId, node, stores }) => routingOf(operatorId, node, stores, { unroutable }));
  // Joins chained in one stage route by one class of equated keys, not by each join's key list.
  const joins = operators.filter((o) => o.node.kind === 'Join').length;
  return operators.flatMap(({ operatorId, node, stores }) => routingOf(
    operatorId, node, stores,
    node.kind === 'Join' && joins > 1 ? { unroutable: 'joins chained in one stage route by a class of keys that is not each join\'s key list' } : { positions: keyPositions },
  ));
}

/** The string the repartition sink hashes for a row's routing values. */
export function repartitionRoutingKey(values: readonly unknown[]): string {
  return stringifyWithLongs(values.map((v) => v ?? null));
}
