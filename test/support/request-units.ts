/** What the handlers' requests cost, counted at the clients for the `sluice cost` comparisons. */
import { itemSize, writeUnitsFor, type Item } from '../../lib/aws/dynamodb-cost.js';

type Command = { constructor: { name: string }; input: Record<string, any> };

/** Write units of one DynamoDB request, by table, by AWS's rules on the items written. */
export function writeUnitsByTable(command: Command): [string, number][] {
  const i = command.input;
  switch (command.constructor.name) {
    case 'PutItemCommand': return [[i.TableName, writeUnitsFor(itemSize(i.Item))]];
    case 'UpdateItemCommand': case 'DeleteItemCommand': return [[i.TableName, 1]];
    case 'BatchWriteItemCommand': return Object.entries(i.RequestItems as Record<string, unknown[]>).map(([t, r]) => [t, r.length]);
    case 'TransactWriteItemsCommand':
      return (i.TransactItems as Record<string, { TableName: string; Item?: Item }>[]).map((t) => {
        const [kind, op] = Object.entries(t)[0]!;
        return [op.TableName, kind === 'Put' ? writeUnitsFor(itemSize(op.Item!), true) : 2];
      });
    default: return [];
  }
}

/** Adds a PutRecords request to an internal stream: its records and their 25 KB payload units. */
export function countHopRecords(command: Command, hop: { records: number; payloadUnits: number }): void {
  if (command.constructor.name !== 'PutRecordsCommand' || !String(command.input.StreamName ?? command.input.StreamARN).includes('repartition')) return;
  for (const r of command.input.Records as { Data: Uint8Array; PartitionKey: string }[]) {
    hop.records++;
    hop.payloadUnits += Math.ceil((r.Data.byteLength + r.PartitionKey.length) / 25_600);
  }
}
