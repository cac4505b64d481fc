/**
 * The DynamoDB tables Sluice uses and their key layouts. The CDK construct creates the same
 * tables from these constants; `ensureTables` creates them on an emulator or for `sluice dev`.
 *
 * Checkpoint table (pk S, sk S), one item collection per state partition and one for watermarks:
 *
 *   pk = `${queryName}#${partitionId}`  sk = `meta`                     QueryMetadata
 *                                        sk = `offset#<batchId, 12 digits>`  OffsetSeq
 *                                        sk = `commit#<batchId, 12 digits>`  CommitEntry
 *                                        sk = `progress#<batchId mod 20, 2 digits>`  recent progress (TTL `expiresAt`)
 *                                        sk = `blame#<batchId, 12 digits>`  BatchBlame of a planned batch (TTL `expiresAt`)
 *   pk = `${queryName}#watermarks`      sk = `<partitionId>`           the partition's watermark row
 *
 * State table (pk S, sk S), one item collection per (partition, operator, store name):
 *
 *   pk = `${queryName}#${partitionId}#${operatorId}/${storeName}`
 *   sk = `d#<version, 12 digits>#<chunk, 4 digits>`   gzip'd delta that made `version` (puts + removals)
 *   sk = `s#<version, 12 digits>#<chunk, 4 digits>`   gzip'd full snapshot at `version`
 *   sk = `m#<version, 12 digits>`                      snapshot marker: written last, says it is complete
 *
 * Sink table (pk S only): one item per result key (see dynamodb-upsert-sink.ts).
 *
 * All tables are on-demand (PAY_PER_REQUEST): Sluice's load follows the stream's.
 */
import {
  CreateTableCommand,
  DescribeTableCommand,
  ResourceInUseException,
  ResourceNotFoundException,
  waitUntilTableExists,
  type AttributeDefinition,
  type CreateTableCommandInput,
  type KeySchemaElement,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { CheckpointError } from '../errors/sluice-error.js';
import { TABLE_KEYS } from '../runtime/runtime-config.js';

export interface TableKeys {
  readonly partitionKey: string;
  readonly sortKey?: string;
}

export const CHECKPOINT_TABLE_KEYS = TABLE_KEYS.checkpoint satisfies TableKeys;
export const STATE_TABLE_KEYS = TABLE_KEYS.state satisfies TableKeys;
export const SINK_TABLE_KEYS = TABLE_KEYS.sink satisfies TableKeys;

/** Sort-key prefixes and item names in the checkpoint table. */
export const CHECKPOINT_ITEMS = {
  metadata: 'meta',
  offsetPrefix: 'offset#',
  commitPrefix: 'commit#',
  /** `progress#<batchId mod PROGRESS_RECORDS.keep, 2 digits>`: the last batches' progress, with a TTL. */
  progressPrefix: 'progress#',
  /** `blame#<batchId, 12 digits>`: how far the search for a planned batch's failing records got (TTL `expiresAt`). */
  blamePrefix: 'blame#',
  /** Partition key suffix of the watermark rows: `${queryName}#watermarks`. */
  watermarksSuffix: '#watermarks',
} as const;

/** Sort-key prefixes in the state table. */
export const STATE_ITEMS = {
  deltaPrefix: 'd#',
  snapshotPrefix: 's#',
  snapshotMarkerPrefix: 'm#',
} as const;

/** Digits of a zero-padded batch id or state version in a sort key. */
export const ID_DIGITS = 12;
/** Digits of a chunk index in a sort key. */
export const CHUNK_DIGITS = 4;

export const padId = (n: number): string => String(n).padStart(ID_DIGITS, '0');
export const padChunk = (n: number): string => String(n).padStart(CHUNK_DIGITS, '0');

/** The CreateTable input for a table with these keys (on-demand billing). */
export function tableDefinition(tableName: string, keys: TableKeys): CreateTableCommandInput {
  const attributes: AttributeDefinition[] = [{ AttributeName: keys.partitionKey, AttributeType: 'S' }];
  const schema: KeySchemaElement[] = [{ AttributeName: keys.partitionKey, KeyType: 'HASH' }];
  if (keys.sortKey) {
    attributes.push({ AttributeName: keys.sortKey, AttributeType: 'S' });
    schema.push({ AttributeName: keys.sortKey, KeyType: 'RANGE' });
  }
  return { TableName: tableName, AttributeDefinitions: attributes, KeySchema: schema, BillingMode: 'PAY_PER_REQUEST' };
}

export interface EnsureTablesOptions {
  readonly checkpointTable: string;
  readonly stateTable: string;
  readonly sinkTable?: string;
  /** Seconds to wait for a new table to become ACTIVE (default 120). */
  readonly maxWaitSeconds?: number;
}

/** Creates the missing tables (on-demand) and waits until every one of them is ACTIVE. */
export async function ensureTables(client: DynamoDBClient, options: EnsureTablesOptions): Promise<void> {
  const wanted: [string, TableKeys][] = [
    [options.checkpointTable, CHECKPOINT_TABLE_KEYS],
    [options.stateTable, STATE_TABLE_KEYS],
  ];
  if (options.sinkTable) wanted.push([options.sinkTable, SINK_TABLE_KEYS]);
  const seen = new Set<string>();
  await Promise.all(wanted.map(async ([name, keys]) => {
    // The checkpoint and state data may share one table: their sort keys never collide.
    if (seen.has(name)) return;
    seen.add(name);
    await ensureTable(client, name, keys, options.maxWaitSeconds ?? 120);
  }));
}

async function ensureTable(client: DynamoDBClient, tableName: string, keys: TableKeys, maxWaitSeconds: number): Promise<void> {
  try {
    const described = await client.send(new DescribeTableCommand({ TableName: tableName }));
    checkKeys(tableName, described.Table?.KeySchema ?? [], keys);
    if (described.Table?.TableStatus === 'ACTIVE') return;
  } catch (error) {
    if (!(error instanceof ResourceNotFoundException)) throw error;
    try {
      await client.send(new CreateTableCommand(tableDefinition(tableName, keys)));
    } catch (createError) {
      // Created concurrently by another process: fine, wait for it like for our own.
      if (!(createError instanceof ResourceInUseException)) throw createError;
    }
  }
  await waitUntilTableExists({ client, maxWaitTime: maxWaitSeconds, minDelay: 1, maxDelay: 5 }, { TableName: tableName });
}

function checkKeys(tableName: string, schema: readonly { AttributeName?: string; KeyType?: string }[], keys: TableKeys): void {
  const hash = schema.find((k) => k.KeyType === 'HASH')?.AttributeName;
  const range = schema.find((k) => k.KeyType === 'RANGE')?.AttributeName;
  if (hash !== keys.partitionKey || range !== keys.sortKey) {
    throw new CheckpointError(`DynamoDB table ${tableName} has keys (${hash}, ${range ?? 'no sort key'}); Sluice needs (${keys.partitionKey}, ${keys.sortKey ?? 'no sort key'}).`, {
      code: 'TABLE_KEYS_MISMATCH', hint: 'point Sluice at a table created by its CDK construct or by ensureTables, or use a new table name.',
    });
  }
}
