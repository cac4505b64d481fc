/**
 * DynamoDB cost accounting and the few request helpers the checkpoint, state store and watermark
 * adapters share. Every request asks for ReturnConsumedCapacity TOTAL and adds what DynamoDB
 * reports to the CostMeter; when a response carries no ConsumedCapacity (some emulators, and
 * every failed conditional write, which AWS charges all the same) the units are computed with
 * AWS's formula from the item sizes:
 *
 *   write:  ceil(item size / 1 KB) per item (at least 1), twice that inside a transaction
 *   read:   strongly consistent ceil(size / 4 KB), eventually consistent half of it; a Query or a
 *           transaction's read sums its items' sizes first (at least 1 unit)
 */
import {
  BatchWriteItemCommand,
  ConditionalCheckFailedException,
  PutItemCommand,
  QueryCommand,
  type AttributeValue,
  type ConsumedCapacity,
  type DynamoDBClient,
  type QueryCommandInput,
  type WriteRequest,
} from '@aws-sdk/client-dynamodb';
import type { CostMeter } from '../core/cost-meter.js';

export type Item = Record<string, AttributeValue>;

const utf8 = (s: string): number => Buffer.byteLength(s, 'utf8');

/** DynamoDB's item size: attribute names plus values, as AWS bills it. */
export function itemSize(item: Item): number {
  let size = 0;
  for (const [name, value] of Object.entries(item)) size += utf8(name) + valueSize(value);
  return size;
}

function valueSize(v: AttributeValue): number {
  if (v.S !== undefined) return utf8(v.S);
  if (v.N !== undefined) {
    const digits = v.N.replace(/[eE].*$/, '').replace(/[-+.]/g, '').replace(/^0+/, '').replace(/0+$/, '').length;
    return Math.ceil(Math.max(digits, 1) / 2) + 1;
  }
  if (v.B !== undefined) return v.B.byteLength;
  if (v.BOOL !== undefined || v.NULL !== undefined) return 1;
  if (v.L !== undefined) return 3 + v.L.reduce((a, e) => a + valueSize(e) + 1, 0);
  if (v.M !== undefined) return 3 + Object.entries(v.M).reduce((a, [k, e]) => a + utf8(k) + valueSize(e) + 1, 0);
  if (v.SS !== undefined) return v.SS.reduce((a, s) => a + utf8(s), 0);
  if (v.NS !== undefined) return v.NS.reduce((a, s) => a + s.length, 0);
  if (v.BS !== undefined) return v.BS.reduce((a, b) => a + b.byteLength, 0);
  return 0;
}

/** Write units AWS charges for one item of `bytes` (x2 in a transaction). */
export const writeUnitsFor = (bytes: number, transactional = false): number =>
  Math.max(1, Math.ceil(bytes / 1024)) * (transactional ? 2 : 1);

/** Read units AWS charges for reading `bytes` in one request (one item, or a Query page). */
export const readUnitsFor = (bytes: number, consistent = true): number =>
  Math.max(1, Math.ceil(bytes / 4096)) * (consistent ? 1 : 0.5);

/** Sums a response's ConsumedCapacity (one entry, or one per table); undefined if absent. */
export function consumedUnits(consumed: ConsumedCapacity | readonly ConsumedCapacity[] | undefined): number | undefined {
  if (consumed === undefined) return undefined;
  const list = Array.isArray(consumed) ? consumed : [consumed as ConsumedCapacity];
  let total = 0;
  let any = false;
  for (const c of list) {
    if (c?.CapacityUnits !== undefined) {
      total += c.CapacityUnits;
      any = true;
    }
  }
  return any ? total : undefined;
}

/** Adds what a request cost to the meter: the reported units, else the formula's `fallback`. */
export function meterUnits(
  meter: CostMeter | undefined,
  kind: 'read' | 'write',
  consumed: ConsumedCapacity | readonly ConsumedCapacity[] | undefined,
  fallback: () => number,
): void {
  if (!meter) return;
  meter.add(kind === 'read' ? 'dynamoDbReadUnits' : 'dynamoDbWriteUnits', consumedUnits(consumed) ?? fallback());
}

/** All pages of a Query, metered. Stops early once `limitItems` items were returned. */
export async function queryAll(
  client: DynamoDBClient,
  input: QueryCommandInput,
  meter: CostMeter | undefined,
  limitItems = Infinity,
): Promise<Item[]> {
  const items: Item[] = [];
  let startKey: Item | undefined;
  do {
    const out = await client.send(new QueryCommand({
      ...input, ReturnConsumedCapacity: 'TOTAL', ...(startKey ? { ExclusiveStartKey: startKey } : {}),
    }));
    const page = out.Items ?? [];
    meterUnits(meter, 'read', out.ConsumedCapacity, () => readUnitsFor(page.reduce((a, i) => a + itemSize(i), 0), input.ConsistentRead === true));
    items.push(...page);
    startKey = out.LastEvaluatedKey;
  } while (startKey && items.length < limitItems);
  return items;
}

/** Puts an item that must not exist yet (a claim, a record kept once): false when it does. */
export async function putItemOnce(client: DynamoDBClient, tableName: string, item: Item): Promise<boolean> {
  try {
    await client.send(new PutItemCommand({ TableName: tableName, Item: item, ConditionExpression: 'attribute_not_exists(pk)' }));
    return true;
  } catch (error) {
    if (error instanceof ConditionalCheckFailedException) return false;
    throw error;
  }
}

/**
 * BatchWriteItem in groups of 25, retrying unprocessed items with backoff, metered. `requests`
 * are for one table.
 */
export async function batchWriteAll(
  client: DynamoDBClient,
  tableName: string,
  requests: readonly WriteRequest[],
  meter: CostMeter | undefined,
  maxRounds = 8,
): Promise<void> {
  for (let i = 0; i < requests.length; i += 25) {
    let pending: WriteRequest[] = requests.slice(i, i + 25);
    for (let round = 0; pending.length > 0; round++) {
      if (round >= maxRounds) throw new Error(`BatchWriteItem on ${tableName}: ${pending.length} items still unprocessed after ${maxRounds} attempts`);
      if (round > 0) await sleep(Math.min(50 * 2 ** round, 2_000));
      const sent = pending;
      const out = await client.send(new BatchWriteItemCommand({ RequestItems: { [tableName]: sent }, ReturnConsumedCapacity: 'TOTAL' }));
      pending = out.UnprocessedItems?.[tableName] ?? [];
      meterUnits(meter, 'write', out.ConsumedCapacity, () => (sent.length - pending.length));
    }
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Runs `fn` over `items` with at most `concurrency` in flight, results in input order. */
export async function mapLimited<T, R>(items: readonly T[], concurrency: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  return results;
}
