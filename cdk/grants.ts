/**
 * What each of a query's functions may do, derived from what its code calls (lib/aws):
 *
 *   function            runs                          tables                       sink   dead letters   streams
 *   Kinesis trigger     the source stage               checkpoint (+ state if the   if it   own prefix     source: the mapping's reads;
 *                       (whole query, or stage 1)      stage keeps state)           writes         internal: ListShards, PutRecords
 *   scheduled           every stage (ticks, drain)     checkpoint (+ state if any   yes     own prefix     source and internal: ListShards,
 *                                                      stage keeps state)                          GetShardIterator, GetRecords; internal: PutRecords
 *   repartition         stages 2.. (state and sink)    checkpoint, state            yes     own prefix     internal: the mappings' reads, and PutRecords on
 *                                                                                                  hops 2.. (chained operators); source: ListShards
 *
 * Table actions are per table: the checkpoint table takes the logs (GetItem, conditional PutItem,
 * Query, the commit transaction's Put and ConditionCheck, BatchWriteItem purges) and, for the
 * functions that run a source-stream stage, the watermark rows (UpdateItem: publish, mark a
 * reshard's parent closed) and the re-drive ledger (a re-drive batch's commit marks its run done,
 * lib/aws/redrive-batch.ts; its records are read with Query); stage 2 takes its watermark from the internal records and never
 * writes a row, so the repartition function has no UpdateItem. The state table takes Query, PutItem and BatchWriteItem; the DynamoDB sink
 * only PutItem, and Scan for the scheduled function when the sink spills (the spill collector reads
 * every item's pointers; its lease is an UpdateItem on the checkpoint table, which the scheduled
 * function has for watermark rows). Nothing calls DeleteItem or DescribeTable at run time.
 *
 * A spilling DynamoDB sink's objects (lib/aws/dynamodb-spill.ts): every function that writes the
 * sink PUTs under `<prefix>_sluice_spill/` and reads (HEAD, and lists to tell a missing key from a
 * denial) under `<prefix>_sluice_spill_tombstones/`; the scheduled function, which runs the
 * collector, also lists both folders, deletes in both and writes tombstones. A new SDK call in
 * lib/aws needs its action added here: test/aws/least-privilege.integration.test.ts runs each
 * function on the emulators and fails on a call its synthesized policy does not allow, and the
 * template tests (test/cdk/least-privilege.test.ts) list every action per function.
 *
 * The Kinesis trigger and the repartition function also read their own stream with
 * GetShardIterator/GetRecords (the reshard guard checks a parent shard is fully committed): the
 * mapping's reads already include both.
 *
 * Customer-managed keys: reading an SSE-KMS object or stream record needs kms:Decrypt, writing one
 * kms:GenerateDataKey; DynamoDB needs kms:Decrypt and kms:DescribeKey to use a table's key and
 * kms:Encrypt/GenerateDataKey to write. Nothing else is granted on a key.
 */
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as kinesis from 'aws-cdk-lib/aws-kinesis';
import type * as kms from 'aws-cdk-lib/aws-kms';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import { acknowledge, iamResourceFinding } from './nag-acknowledgments.js';

export const CHECKPOINT_TABLE_ACTIONS = [
  'dynamodb:GetItem', 'dynamodb:Query', 'dynamodb:PutItem', 'dynamodb:ConditionCheckItem', 'dynamodb:BatchWriteItem',
];
/** The source-stream partitions' watermark rows (lib/aws/dynamodb-watermarks.ts), in the checkpoint table. */
export const WATERMARK_ROW_ACTIONS = ['dynamodb:UpdateItem'];
export const STATE_TABLE_ACTIONS = ['dynamodb:Query', 'dynamodb:PutItem', 'dynamodb:BatchWriteItem'];
export const SINK_TABLE_ACTIONS = ['dynamodb:PutItem'];
/** The S3 sinks read their manifest/pointer, write data objects, and delete superseded ones. */
export const SINK_OBJECT_ACTIONS = ['s3:GetObject', 's3:PutObject', 's3:DeleteObject'];
/** Values a DynamoDB sink spills to S3 (onUnwritableRow: 'spill') are written; the collector deletes them. */
export const SPILL_OBJECT_ACTIONS = ['s3:PutObject'];
export const SPILL_COLLECTOR_OBJECT_ACTIONS = ['s3:DeleteObject', 's3:PutObject'];
/** A writer looks up the collector's tombstones; the collector writes and deletes them. */
export const SPILL_TOMBSTONE_ACTIONS = ['s3:GetObject'];
export const SPILL_COLLECTOR_TOMBSTONE_ACTIONS = ['s3:DeleteObject', 's3:GetObject', 's3:PutObject'];
/** The collector's scan of the sink table for pointers. */
export const SPILL_COLLECTOR_TABLE_ACTIONS = ['dynamodb:Scan'];
const SPILL_DIR = '_sluice_spill/';
const SPILL_TOMBSTONE_DIR = '_sluice_spill_tombstones/';
/** Dead letters are only ever written (one object per record, keyed by its identity). */
export const DEAD_LETTER_OBJECT_ACTIONS = ['s3:PutObject'];
/**
 * What a Kinesis event source mapping reads with the function's role (Lambda's documented list for
 * a shared-throughput consumer); not ListStreams, and not SubscribeToShard, which only an
 * enhanced fan-out consumer uses.
 */
export const EVENT_SOURCE_READ_ACTIONS = [
  'kinesis:DescribeStream', 'kinesis:DescribeStreamSummary', 'kinesis:GetRecords', 'kinesis:GetShardIterator', 'kinesis:ListShards',
];
/** The scheduled function's own reads (lib/aws/kinesis-shard-reader.ts): list, iterate, read. */
export const SHARD_READ_ACTIONS = ['kinesis:ListShards', 'kinesis:GetShardIterator', 'kinesis:GetRecords'];
/** Stage 1 and the scheduled function list the internal shards (to route by hash range) and write them. */
export const REPARTITION_WRITE_ACTIONS = ['kinesis:ListShards', 'kinesis:PutRecords'];

const KMS_READ = ['kms:Decrypt'];
const KMS_WRITE = ['kms:GenerateDataKey'];
const KMS_TABLE = ['kms:Decrypt', 'kms:DescribeKey', 'kms:Encrypt', 'kms:GenerateDataKey'];

export interface QueryResources {
  readonly checkpointTable: dynamodb.ITable;
  readonly stateTable: dynamodb.ITable;
  readonly sinkTable?: dynamodb.ITable;
  /** Tables a replay of the query writes instead of `sinkTable` (`sluice replay --sink-table`): granted as it is. */
  readonly replaySinkTables?: readonly dynamodb.ITable[];
  readonly sinkBucket?: s3.IBucket;
  readonly sinkPrefix?: string;
  readonly deadLetterBucket: s3.IBucket;
  /** The query's own dead-letter key prefix (`<deadLetterPrefix><query name>/`). */
  readonly deadLetterObjectPrefix: string;
  readonly stream: kinesis.IStream;
  /** A query over several streams: the source streams after the first, granted as `stream` is. */
  readonly otherSourceStreams?: readonly kinesis.IStream[];
  readonly repartitionStream?: kinesis.IStream;
  /**
   * The internal streams after the first (hop 2, 3, ...) of a query with chained stateful
   * operators: stage k + 1 reads hop k, written by stage k on the repartition function.
   */
  readonly laterRepartitionStreams?: readonly kinesis.IStream[];
}

/** What one function touches; the grants follow from it. */
export interface FunctionAccess {
  readonly state: boolean;
  readonly sink: boolean;
  /** Writes the source-stream partitions' watermark rows (every function but stage 2's). */
  readonly watermarkRows: boolean;
  /** Source stream: read by its event source mapping, by the function itself, or only listed. */
  readonly source: 'event-source' | 'read' | 'list';
  /** Internal stream: read by its mapping (stage 2), written (stage 1), written and read (scheduled), or untouched. */
  readonly internal: 'event-source' | 'write' | 'read-write' | 'none';
  /** Runs the spill collector (a spilling DynamoDB sink's scheduled function). */
  readonly spillCollector?: boolean;
}

/** The three functions' access for a query (a stateless stage 1 touches neither state nor sink). */
export function accessOf(options: { isStateful: boolean; needsRepartition: boolean }): {
  kinesisTrigger: FunctionAccess; scheduled: FunctionAccess; repartition: FunctionAccess;
} {
  const { isStateful, needsRepartition } = options;
  return {
    kinesisTrigger: {
      state: isStateful && !needsRepartition, sink: !needsRepartition, watermarkRows: true, source: 'event-source', internal: needsRepartition ? 'write' : 'none',
    },
    scheduled: { state: isStateful, sink: true, watermarkRows: true, source: 'read', internal: needsRepartition ? 'read-write' : 'none', spillCollector: true },
    repartition: { state: true, sink: true, watermarkRows: false, source: 'list', internal: 'event-source' },
  };
}

/** The dead-letter key prefix the runtime's S3DeadLetterWriter writes one query's records under. */
export function deadLetterObjectPrefix(deadLetterPrefix: string, queryName: string): string {
  const normalized = deadLetterPrefix === '' || deadLetterPrefix.endsWith('/') ? deadLetterPrefix : `${deadLetterPrefix}/`;
  return `${normalized}${queryName}/`;
}

export function grantFunctionAccess(fn: lambda.Function, access: FunctionAccess, resources: QueryResources): void {
  grantTable(fn, resources.checkpointTable, access.watermarkRows ? [...CHECKPOINT_TABLE_ACTIONS, ...WATERMARK_ROW_ACTIONS] : CHECKPOINT_TABLE_ACTIONS);
  if (access.state) grantTable(fn, resources.stateTable, STATE_TABLE_ACTIONS);
  const findings: string[] = [];
  if (access.sink) {
    const spills = !!(resources.sinkTable && resources.sinkBucket && resources.sinkPrefix !== undefined);
    const collects = spills && access.spillCollector === true;
    const sinkTableActions = collects ? [...SINK_TABLE_ACTIONS, ...SPILL_COLLECTOR_TABLE_ACTIONS] : SINK_TABLE_ACTIONS;
    if (resources.sinkTable) grantTable(fn, resources.sinkTable, sinkTableActions);
    // A replay's own sink table: written like the live one, and scanned by the spill collector too.
    for (const table of resources.sinkTable ? resources.replaySinkTables ?? [] : []) grantTable(fn, table, sinkTableActions);
    if (spills) {
      const bucket = resources.sinkBucket!;
      const prefix = resources.sinkPrefix!;
      findings.push(grantObjects(fn, bucket, `${prefix}${SPILL_DIR}`, collects ? SPILL_COLLECTOR_OBJECT_ACTIONS : SPILL_OBJECT_ACTIONS, KMS_WRITE));
      findings.push(grantObjects(fn, bucket, `${prefix}${SPILL_TOMBSTONE_DIR}`, collects ? SPILL_COLLECTOR_TOMBSTONE_ACTIONS : SPILL_TOMBSTONE_ACTIONS, collects ? [...KMS_READ, ...KMS_WRITE] : KMS_READ));
      iam.Grant.addToPrincipal({
        grantee: fn, actions: ['s3:ListBucket'], resourceArns: [bucket.bucketArn],
        conditions: { StringLike: { 's3:prefix': [collects ? `${prefix}_sluice_spill*` : `${prefix}${SPILL_TOMBSTONE_DIR}*`] } },
      });
    } else if (resources.sinkBucket && resources.sinkPrefix !== undefined) {
      findings.push(grantObjects(fn, resources.sinkBucket, resources.sinkPrefix, SINK_OBJECT_ACTIONS, [...KMS_READ, ...KMS_WRITE]));
      // The snapshot sink lists its own keys; listing reveals key names only, and only under the prefix.
      iam.Grant.addToPrincipal({
        grantee: fn, actions: ['s3:ListBucket'], resourceArns: [resources.sinkBucket.bucketArn],
        conditions: { StringLike: { 's3:prefix': [`${resources.sinkPrefix}*`] } },
      });
    }
  }
  findings.push(grantObjects(fn, resources.deadLetterBucket, resources.deadLetterObjectPrefix, DEAD_LETTER_OBJECT_ACTIONS, KMS_WRITE));
  for (const finding of new Set(findings)) {
    acknowledge(fn.role!, `AwsSolutions-IAM5[${finding}]`,
      'Object-level S3 access is scoped to this query\'s own key prefix; the object keys below it (batch files, '
      + 'snapshots, one dead letter per record) are created at run time, so the resource must end in a wildcard.');
  }

  const { stream, repartitionStream } = resources;
  const sourceActions = access.source === 'event-source' ? EVENT_SOURCE_READ_ACTIONS : access.source === 'read' ? SHARD_READ_ACTIONS : ['kinesis:ListShards'];
  for (const source of [stream, ...(resources.otherSourceStreams ?? [])]) grantStream(fn, source, sourceActions, access.source === 'list' ? [] : KMS_READ);
  if (repartitionStream && access.internal !== 'none') {
    const internalActions = {
      'event-source': EVENT_SOURCE_READ_ACTIONS,
      write: REPARTITION_WRITE_ACTIONS,
      'read-write': [...new Set([...SHARD_READ_ACTIONS, ...REPARTITION_WRITE_ACTIONS])],
    }[access.internal];
    const keyActions = access.internal === 'event-source' ? KMS_READ : access.internal === 'write' ? KMS_WRITE : [...KMS_READ, ...KMS_WRITE];
    grantStream(fn, repartitionStream, internalActions, keyActions);
  }
  // A later hop is written by the stage before it (the repartition function, or the scheduled one
  // running it) and read by the next (the same functions): the Kinesis trigger never touches it.
  if (access.internal === 'event-source' || access.internal === 'read-write') {
    for (const later of resources.laterRepartitionStreams ?? []) {
      grantStream(fn, later, [...new Set([...EVENT_SOURCE_READ_ACTIONS, ...(access.internal === 'read-write' ? SHARD_READ_ACTIONS : []), ...REPARTITION_WRITE_ACTIONS])],
        [...KMS_READ, ...KMS_WRITE]);
    }
  }
}

function grantTable(fn: lambda.Function, table: dynamodb.ITable, actions: string[]): void {
  table.grant(fn, ...actions);
  // The generic table grant adds nothing on the key: a customer-managed table key needs its own.
  grantKey(fn, table.encryptionKey, KMS_TABLE);
}

function grantObjects(fn: lambda.Function, bucket: s3.IBucket, prefix: string, actions: string[], keyActions: string[]): string {
  const objects = bucket.arnForObjects(`${prefix}*`);
  iam.Grant.addToPrincipal({ grantee: fn, actions, resourceArns: [objects] });
  grantKey(fn, bucket.encryptionKey, keyActions);
  return iamResourceFinding(fn, objects);
}

function grantStream(fn: lambda.Function, stream: kinesis.IStream, actions: string[], keyActions: string[]): void {
  iam.Grant.addToPrincipal({ grantee: fn, actions, resourceArns: [stream.streamArn] });
  grantKey(fn, stream.encryptionKey, keyActions);
}

function grantKey(fn: lambda.Function, key: kms.IKey | undefined, actions: string[]): void {
  if (key && actions.length > 0) key.grant(fn, ...actions);
}
