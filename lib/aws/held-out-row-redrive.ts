/**
 * Re-driving the rows stage 2 held out (issue 11): a row of the internal stream whose application
 * raised a data error in the stage reading it (a long sum past int64 while merging a partial
 * aggregate). Its dead letter (held-out-rows.ts) holds the row itself, as an internal record of one
 * row; this puts that record back on the internal shard it came from, tagged with the letter's id
 * (`RepartitionRecord.redrive`), for the deployed (fixed) stage 2 to apply.
 *
 * Why the row and not the source records: a partial aggregate stands for the records of one group
 * in one stage-1 batch. Re-running source records through stage 1 would need exactly those records
 * (a stage-1 batch's other groups were applied already), read back from a source stream whose
 * retention ends before the internal stream's (its records were written first); the row is in the
 * letter for as long as the letter is kept.
 *
 * Exactly once: stage 2 applies a tagged record under its own progress entry
 * (`<src>@redrive:<letter id>`, repartition-records.ts), committed with the batch that applies it;
 * a second copy (a re-drive run again, a PutRecord retry) is a duplicate there. The ledger
 * (checkpoint table, pk `${query}#redrive`, sk the letter's id) only reports: a claim not confirmed
 * (a re-drive that stopped between claim and put) is sent again, safely. The watermark leaves such
 * an entry out: a re-driven row behind it is a late row, dropped as Spark drops late input.
 *
 * Limits: the row is stage 1's output under the query as deployed when it was sent. A fix that
 * changes stage 1's computation (what a partial adds up) is not applied to it; a fix that changes
 * the partial's layout (a widened buffer type) makes it unusable, and it is refused, with the reason.
 */
import { UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { PutRecordCommand } from '@aws-sdk/client-kinesis';
import { compilePartialAggregator } from '../execution/partial-aggregation.js';
import { compileForDeployment } from '../query/compiled-query.js';
import type { QueryDefinition } from '../query/query-definition.js';
import type { DeploymentDescriptor, RuntimeConfig } from '../runtime/runtime-config.js';
import type { DeadLetterRecord } from '../sources/dead-letter.js';
import { INTERNAL_SHARD_MARK } from '../sources/held-out-rows.js';
import { decodeRepartitionRecord, encodeRepartitionRecord, type RepartitionRecord } from '../sources/repartition-records.js';
import type { AwsClients } from './clients.js';
import { putItemOnce, type Item } from './dynamodb-cost.js';
import { openShardHashKey } from './internal-range-redrive.js';
import { ledgerPkOf, redriveIdOf } from './through-query-redrive.js';

/** A held-out row's letter: an internal stream's, named `<record's sequence number>.<row>`. */
export const isHeldOutRowLetter = (letter: Pick<DeadLetterRecord, 'shardId' | 'sequenceNumber'>): boolean =>
  letter.shardId.endsWith(INTERNAL_SHARD_MARK) && /^\d+\.\d+$/.test(letter.sequenceNumber);

export interface HeldOutRowReport {
  /** Put back on the internal stream by this re-drive (or sent again: a claim an earlier run left unconfirmed). */
  readonly redriven: { readonly id: string; readonly internalShardId: string; readonly sequenceNumber: string }[];
  /** Put back by an earlier re-drive (the ledger says so). */
  readonly alreadyRedriven: number;
  /** Re-driven rows held out again (stage 2 raised again): reported, never put back in a loop. */
  readonly failedAgain: { readonly id: string; readonly reason: string }[];
  /** Letters this re-drive cannot put back, with why (left dead-lettered). */
  readonly refused: { readonly id: string; readonly reason: string }[];
  readonly wouldRedrive: number;
}

export interface HeldOutRowOptions {
  readonly definition: QueryDefinition;
  readonly config: RuntimeConfig;
  readonly dryRun?: boolean;
}

/** Why the fixed query's stage 2 cannot take the row (null: it can). */
function refusalOf(record: RepartitionRecord, definition: QueryDefinition, config: RuntimeConfig, deployment: DeploymentDescriptor): string | null {
  if ((deployment.repartitionStreamNames?.length ?? 1) > 1) return 'the query has several internal streams, and the letter does not name the one it came from';
  if (record.in !== undefined) return 'a row of a stage reading several inputs (a join): not re-driven yet';
  const live = deployment.activeNamespace === undefined || deployment.activeNamespace === deployment.sluiceQuery ? undefined : deployment.activeNamespace;
  if (record.ns !== live) return `a row of namespace ${record.ns ?? deployment.sluiceQuery}, not the live one`;
  const hop = compileForDeployment(definition, config).hops[0];
  if (!hop) return 'the fixed query has no repartition stage: its stage 2 state no longer exists';
  const row = record.rows[0] ?? [];
  if (record.partial) {
    if (!hop.partial) return 'the row is a partial aggregate, and the fixed query\'s stage 2 takes rows, not partials';
    const initial = compilePartialAggregator(hop.partial, null).aggregation.initialBuffers();
    const keys = hop.partial.groupingExprs.length;
    const buffers = row.slice(1 + keys);
    // Other buffers, or buffers of another shape (a long sum's value, a decimal sum's [sum, count]): the fixed query changed an aggregate or widened a type.
    const changed = buffers.length !== initial.length ? `${buffers.length} buffers, the fixed query's ${initial.length}`
      : initial.flatMap((b, i) => (b !== null && buffers[i] !== null && shapeOf(b) !== shapeOf(buffers[i]) ? [`buffer ${i} is ${shapeOf(buffers[i])}, the fixed query's ${shapeOf(b)}`] : []))[0];
    if (changed !== undefined) {
      return `the partial aggregate does not fit the fixed query's (${changed}): a changed aggregate or a widened type; `
        + 'its state would need the fixed query\'s own partial of those source records (not re-driven)';
    }
  } else if (hop.partial && row.length !== hop.partial.input.length) {
    return `the row has ${row.length} values, the fixed query's rows ${hop.partial.input.length}: its layout changed`;
  }
  return null;
}

/** A buffer's shape: a scalar, or a list of n values (a decimal sum's [sum, count], an average's). */
const shapeOf = (value: unknown): string => (Array.isArray(value) ? `a list of ${value.length}` : 'a single value');

export async function redriveHeldOutRows(
  clients: AwsClients, deployment: DeploymentDescriptor, letters: readonly DeadLetterRecord[], claims: ReadonlyMap<string, Item>, options: HeldOutRowOptions,
): Promise<HeldOutRowReport> {
  const report = { redriven: [] as HeldOutRowReport['redriven'], alreadyRedriven: 0, failedAgain: [] as HeldOutRowReport['failedAgain'], refused: [] as HeldOutRowReport['refused'], wouldRedrive: 0 };
  const streamName = deployment.repartitionStreamNames?.[0] ?? deployment.repartitionStreamName;
  const due: { id: string; letter: DeadLetterRecord; shardId: string; record: RepartitionRecord }[] = [];
  for (const letter of letters) {
    const id = redriveIdOf(letter.shardId, letter.sequenceNumber);
    let record: RepartitionRecord;
    try {
      record = decodeRepartitionRecord(Buffer.from(letter.dataBase64, 'base64'));
    } catch (error) {
      report.refused.push({ id, reason: `not a repartition record: ${(error as Error).message}` });
      continue;
    }
    // A row put back once and held out again: its letter carries the re-drive's tag.
    if (record.redrive !== undefined) { report.failedAgain.push({ id, reason: letter.reason }); continue; }
    if (claims.get(id)?.newSequenceNumber?.S) { report.alreadyRedriven++; continue; }
    if (!streamName) { report.refused.push({ id, reason: 'the deployment names no internal stream' }); continue; }
    const refusal = refusalOf(record, options.definition, options.config, deployment);
    if (refusal) { report.refused.push({ id, reason: refusal }); continue; }
    due.push({ id, letter, shardId: letter.shardId.slice(0, -INTERNAL_SHARD_MARK.length), record });
  }
  const hashKeys = new Map<string, string | null>();
  const open: typeof due = [];
  for (const d of due) {
    if (!hashKeys.has(d.shardId)) hashKeys.set(d.shardId, await openShardHashKey(clients, streamName!, d.shardId));
    // Its group's state went to a child of the shard when it was resharded: finding that child is not done yet.
    if (hashKeys.get(d.shardId) === null) report.refused.push({ id: d.id, reason: `internal shard ${d.shardId} is closed (resharded): not re-driven yet` });
    else open.push(d);
  }
  report.wouldRedrive = open.length;
  if (options.dryRun) return report;
  const table = deployment.checkpointTable;
  const pk = ledgerPkOf(deployment.sluiceQuery);
  for (const d of open) {
    await putItemOnce(clients.dynamodb, table, { pk: { S: pk }, sk: { S: d.id }, kind: { S: 'held-out-row' }, claimedAtMs: { N: String(Date.now()) } });
    const put = await clients.kinesis.send(new PutRecordCommand({
      StreamName: streamName, PartitionKey: d.letter.partitionKey, ExplicitHashKey: hashKeys.get(d.shardId)!,
      Data: encodeRepartitionRecord({ ...d.record, redrive: d.id }),
    }));
    await clients.dynamodb.send(new UpdateItemCommand({
      TableName: table, Key: { pk: { S: pk }, sk: { S: d.id } },
      UpdateExpression: 'SET newShardId = :s, newSequenceNumber = :q, redrivenAtMs = :t',
      ExpressionAttributeValues: { ':s': { S: `${put.ShardId!}${INTERNAL_SHARD_MARK}` }, ':q': { S: put.SequenceNumber! }, ':t': { N: String(Date.now()) } },
    }));
    report.redriven.push({ id: d.id, internalShardId: put.ShardId!, sequenceNumber: put.SequenceNumber! });
  }
  return report;
}
