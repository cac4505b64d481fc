/**
 * Re-drive into the stream (`sluice redrive --into-stream`, opt-in): dead-lettered records back into
 * the source stream (after the query or the producer was fixed), each at most once. Every consumer
 * of the stream reads them again; the default re-drive runs them through the query itself
 * (dead-letter-reprocess.ts). A ledger in the checkpoint table (pk `${queryName}#redrive`, sk the
 * record's `<shardId>/<sequenceNumber>`) says which were re-driven:
 *
 *   1. claim: a conditional PutItem of the ledger item (refused if it exists: re-driven already);
 *   2. PutRecord with the original data and partition key;
 *   3. confirm: the ledger item gets the new shard and sequence number.
 *
 * A crash between 1 and 3 leaves a claim without a new sequence number: never sent twice, listed as
 * unconfirmed. A re-driven record that fails again is dead-lettered under its new sequence number;
 * the ledger knows that number, so it is reported as failed again and not re-driven in a loop.
 */
import { ConditionalCheckFailedException, PutItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { PutRecordCommand } from '@aws-sdk/client-kinesis';
import type { DeploymentDescriptor } from '../runtime/runtime-config.js';
import { isResultRowLetter, type DeadLetterRecord } from '../sources/dead-letter.js';
import { isRedriveProgressKey } from '../sources/repartition-records.js';
import { isInternalStreamLetter } from '../sources/held-out-rows.js';
import type { AwsClients } from './clients.js';
import { queryAll } from './dynamodb-cost.js';
import { readDeadLetters } from './s3-dead-letter-writer.js';
import { encodeKeySegment, normalizePrefix } from './s3-util.js';

export interface RedriveOptions {
  /** Only records that arrived at or after this time (ms). */
  readonly sinceMs?: number;
  readonly shardId?: string;
  /** List what would be re-driven, change nothing. */
  readonly dryRun?: boolean;
}

export interface RedriveReport {
  readonly redriven: { shardId: string; sequenceNumber: string; newShardId: string; newSequenceNumber: string }[];
  /** Re-driven before (the ledger has them). */
  readonly alreadyRedriven: number;
  /** Dead letters of records that were themselves re-driven and failed again. */
  readonly failedAgain: { shardId: string; sequenceNumber: string; reason: string }[];
  /** Claimed by an earlier run that stopped before confirming: not sent again. */
  readonly unconfirmed: string[];
  readonly wouldRedrive: number;
  /** Letters of a stage reading an internal stream (`<shard>@internal`, held-out-rows.ts): not source records, left. */
  readonly notFromSource: number;
  /** Letters of result rows (`result-batch-…`: refused by the sink, or raising above state): output rows, not source records, left. */
  readonly resultRows: number;
}

interface LedgerEntry { readonly id: string; readonly newId: string | null }

const idOf = (shardId: string, sequenceNumber: string): string => `${shardId}/${sequenceNumber}`;

export async function redriveDeadLetters(clients: AwsClients, deployment: DeploymentDescriptor, options: RedriveOptions = {}): Promise<RedriveReport> {
  const query = deployment.sluiceQuery;
  const pk = `${query}#redrive`;
  const ledger: LedgerEntry[] = (await queryAll(clients.dynamodb, {
    TableName: deployment.checkpointTable, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': { S: pk } }, ConsistentRead: true,
  }, undefined)).filter((i) => !i.sk!.S!.startsWith('run#')).map((i) => ({ id: i.sk!.S!, newId: i.newShardId?.S && i.newSequenceNumber?.S ? idOf(i.newShardId.S, i.newSequenceNumber.S) : null }));
  const redrivenIds = new Set(ledger.map((e) => e.id));
  const newIds = new Set(ledger.flatMap((e) => (e.newId ? [e.newId] : [])));
  const letters = await readDeadLetters(clients.s3, deployment.deadLetterBucket,
    `${normalizePrefix(deployment.deadLetterPrefix ?? 'dead-letter/')}${encodeKeySegment(query)}/`);
  const report: { -readonly [K in keyof RedriveReport]: RedriveReport[K] } = {
    redriven: [], alreadyRedriven: 0, failedAgain: [], unconfirmed: ledger.filter((e) => !e.newId).map((e) => e.id), wouldRedrive: 0, notFromSource: 0, resultRows: 0,
  };
  const due: DeadLetterRecord[] = [];
  for (const letter of letters) {
    if (options.shardId && letter.shardId !== options.shardId) continue;
    if (options.sinceMs !== undefined && letter.approximateArrivalTimestampMs < options.sinceMs) continue;
    // Its data is an output row: put into the source stream, every consumer would read it as a record.
    if (isResultRowLetter(letter)) { report.resultRows++; continue; }
    if (isInternalStreamLetter(letter)) { report.notFromSource++; continue; }
    const id = idOf(letter.shardId, letter.sequenceNumber);
    // A letter of a re-drive's own partition (`<shard>@redrive:<run>`, dead-letter-reprocess.ts) failed again too.
    if (newIds.has(id) || isRedriveProgressKey(letter.shardId)) report.failedAgain.push({ shardId: letter.shardId, sequenceNumber: letter.sequenceNumber, reason: letter.reason });
    else if (redrivenIds.has(id)) report.alreadyRedriven++;
    else due.push(letter);
  }
  report.wouldRedrive = due.length;
  if (options.dryRun) return report;
  for (const letter of due) {
    const key = { pk: { S: pk }, sk: { S: idOf(letter.shardId, letter.sequenceNumber) } };
    try {
      await clients.dynamodb.send(new PutItemCommand({
        TableName: deployment.checkpointTable, Item: { ...key, claimedAtMs: { N: String(Date.now()) } }, ConditionExpression: 'attribute_not_exists(pk)',
      }));
    } catch (error) {
      // Another run claimed it since the ledger was read.
      if (error instanceof ConditionalCheckFailedException) { report.alreadyRedriven++; continue; }
      throw error;
    }
    const put = await clients.kinesis.send(new PutRecordCommand({
      StreamName: deployment.streamName, PartitionKey: letter.partitionKey, Data: Buffer.from(letter.dataBase64, 'base64'),
    }));
    await clients.dynamodb.send(new UpdateItemCommand({
      TableName: deployment.checkpointTable, Key: key,
      UpdateExpression: 'SET newShardId = :s, newSequenceNumber = :q, redrivenAtMs = :t',
      ExpressionAttributeValues: { ':s': { S: put.ShardId! }, ':q': { S: put.SequenceNumber! }, ':t': { N: String(Date.now()) } },
    }));
    report.redriven.push({ shardId: letter.shardId, sequenceNumber: letter.sequenceNumber, newShardId: put.ShardId!, newSequenceNumber: put.SequenceNumber! });
  }
  return report;
}
