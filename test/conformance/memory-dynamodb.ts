/**
 * An in-memory stand-in for the DynamoDB client, for exactly the requests the state store
 * (lib/aws/dynamodb-state-store.ts) sends: PutItem, Query on `pk = :pk AND sk BETWEEN :lo AND :hi`
 * or `pk = :pk AND begins_with(sk, :p)` (with Limit, ScanIndexForward and pagination), and
 * BatchWriteItem. Anything else throws, so a change to the store's requests is noticed here rather
 * than answered wrongly. It lets the conformance scenarios run the deployed store's own code
 * (deltas, snapshots, chunks, value encoding, reloading) at in-process speed; the same run against
 * DynamoDB Local is `npm run conformance -- --dynamodb-local <dir>`.
 *
 * Items are stored as copies (binary values copied too), as DynamoDB would: nothing a caller keeps
 * can change what was written.
 */
import {
  BatchWriteItemCommand,
  PutItemCommand,
  QueryCommand,
  type AttributeValue,
  type DynamoDBClient,
  type QueryCommandOutput,
} from '@aws-sdk/client-dynamodb';

type Item = Record<string, AttributeValue>;

/** Items per Query page, small so that the store's pagination is exercised. */
const PAGE_ITEMS = 4;

function copyItem(item: Item): Item {
  const out: Item = {};
  for (const [k, v] of Object.entries(item)) out[k] = v.B !== undefined ? { B: Uint8Array.from(v.B) } : { ...v } as AttributeValue;
  return out;
}

function str(values: Record<string, AttributeValue> | undefined, name: string): string {
  const s = values?.[name]?.S;
  if (s === undefined) throw new Error(`memory DynamoDB: expression value ${name} is not a string`);
  return s;
}

export class MemoryDynamoDb {
  /** table -> pk -> sk -> item */
  private readonly tables = new Map<string, Map<string, Map<string, Item>>>();
  requests = 0;

  /** The client to hand to the store. */
  asClient(): DynamoDBClient {
    return this as unknown as DynamoDBClient;
  }

  async send(command: unknown): Promise<unknown> {
    this.requests++;
    if (command instanceof PutItemCommand) {
      const { TableName, Item: item } = command.input;
      this.collection(TableName!, item!.pk!.S!).set(item!.sk!.S!, copyItem(item!));
      return {};
    }
    if (command instanceof QueryCommand) return this.query(command);
    if (command instanceof BatchWriteItemCommand) {
      for (const [table, requests] of Object.entries(command.input.RequestItems ?? {})) {
        for (const r of requests) {
          if (r.PutRequest) this.collection(table, r.PutRequest.Item!.pk!.S!).set(r.PutRequest.Item!.sk!.S!, copyItem(r.PutRequest.Item!));
          else if (r.DeleteRequest) this.collection(table, r.DeleteRequest.Key!.pk!.S!).delete(r.DeleteRequest.Key!.sk!.S!);
        }
      }
      return { UnprocessedItems: {} };
    }
    throw new Error(`memory DynamoDB: unsupported request ${(command as object).constructor.name}`);
  }

  /** Every item of a table, for tests. */
  items(table: string): Item[] {
    return [...(this.tables.get(table)?.values() ?? [])].flatMap((c) => [...c.values()]);
  }

  private collection(table: string, pk: string): Map<string, Item> {
    let t = this.tables.get(table);
    if (!t) this.tables.set(table, (t = new Map()));
    let c = t.get(pk);
    if (!c) t.set(pk, (c = new Map()));
    return c;
  }

  private query(command: QueryCommand): QueryCommandOutput {
    const { TableName, KeyConditionExpression: expr, ExpressionAttributeValues: values, ScanIndexForward, Limit, ExclusiveStartKey } = command.input;
    let inRange: (sk: string) => boolean;
    if (expr === 'pk = :pk AND sk BETWEEN :lo AND :hi') {
      const lo = str(values, ':lo');
      const hi = str(values, ':hi');
      inRange = (sk) => sk >= lo && sk <= hi;
    } else if (expr === 'pk = :pk AND begins_with(sk, :p)') {
      const prefix = str(values, ':p');
      inRange = (sk) => sk.startsWith(prefix);
    } else {
      throw new Error(`memory DynamoDB: unsupported key condition ${expr}`);
    }
    const forward = ScanIndexForward !== false;
    const collection = this.collection(TableName!, str(values, ':pk'));
    // DynamoDB orders sort keys by their UTF-8 bytes; the store's keys are ASCII, so code units agree.
    let sks = [...collection.keys()].filter(inRange).sort();
    if (!forward) sks.reverse();
    const after = ExclusiveStartKey?.sk?.S;
    if (after !== undefined) sks = sks.filter((sk) => (forward ? sk > after : sk < after));
    const pageSize = Math.min(Limit ?? Infinity, PAGE_ITEMS);
    const page = sks.slice(0, pageSize);
    const more = sks.length > page.length;
    return {
      Items: page.map((sk) => copyItem(collection.get(sk)!)),
      Count: page.length,
      ...(more ? { LastEvaluatedKey: { pk: { S: str(values, ':pk') }, sk: { S: page[page.length - 1]! } } } : {}),
      $metadata: {},
    };
  }
}
