/**
 * Re-drive of skipped batches (`sluice redrive --skipped`): each recorded skipped range that still
 * waits (lib/aws/skipped-batches.ts) is re-read from its stream while the stream retains it
 * (GetShardIterator AT_SEQUENCE_NUMBER at its first record, GetRecords to its last), and then, per
 * record, once:
 *
 *   - committed by a batch after all (a response lost on every retry of a committed batch): left;
 *   - a record that was itself re-driven before and was skipped again: dead-lettered with the
 *     reason, never re-driven in a loop;
 *   - undecodable by the query's source (when the query module is given): dead-lettered with the
 *     decoder's reason;
 *   - else put back into the source stream with its partition key, claimed first in the re-drive
 *     ledger that dead-letter re-drive uses (pk `${queryName}#redrive`), so that no record is sent
 *     twice, whichever re-drive runs.
 *
 * Records the stream no longer holds are counted as expired: lost, and said so. The range is then
 * marked redriven with those counts. A run that stops halfway leaves the range waiting; the next
 * run finds its sent records claimed and sends only the rest.
 *
 * Ranges on an internal repartition stream: records the scheduled drain has committed since (it
 * reads stage 2's shards from their committed position) are left; the others that stage 2 never
 * applied are put back on their shard tagged with the range, so stage 2 applies them once although
 * it has moved past their source batches (lib/aws/internal-range-redrive.ts).
 */
import { ConditionalCheckFailedException, PutItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { PutRecordCommand } from '@aws-sdk/client-kinesis';
import type { DeploymentDescriptor } from '../runtime/runtime-config.js';
import { isMultiSource, sourcesOf, type QueryDefinition } from '../query/query-definition.js';
import { sourceSchemaOf } from '../query/validate-query.js';
import { createRecordDecoder } from '../sources/record-decoder.js';
import type { DeadLetterRecord } from '../sources/dead-letter.js';
import type { ShardRecord } from '../sources/kinesis-shard-source.js';
import { asKinesisOffset } from '../sources/kinesis-shard-source.js';
import type { AwsClients } from './clients.js';
import { queryAll } from './dynamodb-cost.js';
import { KinesisShardReader } from './kinesis-shard-reader.js';
import { checkpointOf } from './query-inspection.js';
import { S3DeadLetterWriter } from './s3-dead-letter-writer.js';
import { isExpiredPlanned, SkippedBatchStore, type SkippedRange, type SkippedRangeOutcome } from './skipped-batches.js';
import { openShardHashKey, planInternalRedrive, sendInternalRedrive } from './internal-range-redrive.js';

export type RecordCheck = (data: Uint8Array, streamName: string) => { readonly ok: true } | { readonly ok: false; readonly reason: string };

/** The query's own decoders, per source stream of the deployment: a record they refuse is dead-lettered, not put back. */
export function sourceCheckOf(definition: QueryDefinition, deployment: DeploymentDescriptor): RecordCheck {
  const multi = isMultiSource(definition);
  const decoders = new Map(sourcesOf(definition).map((s) => [
    multi ? deployment.sourceStreams?.[s.name] ?? '' : deployment.streamName, createRecordDecoder(s.spec, sourceSchemaOf(s.spec)),
  ]));
  return (data, streamName) => {
    const decode = decoders.get(streamName);
    if (!decode) return { ok: false, reason: `no source of query '${definition.name}' reads stream ${streamName}` };
    const decoded = decode(data);
    return decoded.ok ? { ok: true } : { ok: false, reason: decoded.reason };
  };
}

export interface SkippedRedriveOptions {
  readonly shardId?: string;
  /** Only the range starting at this sequence number. */
  readonly firstSequenceNumber?: string;
  /** Only the ranges this accepts. */
  readonly only?: (range: SkippedRange) => boolean;
  readonly dryRun?: boolean;
  /** The query's source decoder: undecodable records are dead-lettered instead of put back. */
  readonly check?: RecordCheck;
  /** Committed batches looked at per range, newest first (default 1,000). */
  readonly maxBatchesBack?: number;
}

export interface SkippedRangeReport {
  readonly partitionId: string;
  readonly shardId: string;
  readonly first: string;
  readonly last: string;
  readonly reason: string;
  readonly outcome: Omit<SkippedRangeOutcome, 'atMs'> | null;
  /** Why it was not re-driven (an internal stream's range, a dry run). */
  readonly note?: string;
}

export interface SkippedRedriveReport {
  readonly ranges: SkippedRangeReport[];
  readonly redriven: number;
  readonly deadLettered: number;
  readonly alreadyCommitted: number;
  readonly expired: number;
  readonly skippedAgain: number;
  /** Ranges redriven by an earlier run (left alone). */
  readonly alreadyRedriven: number;
}

const idOf = (shardId: string, sequenceNumber: string): string => `${shardId}/${sequenceNumber}`;

export async function redriveSkippedBatches(
  clients: AwsClients, deployment: DeploymentDescriptor, options: SkippedRedriveOptions = {},
): Promise<SkippedRedriveReport> {
  const query = deployment.sluiceQuery;
  const store = new SkippedBatchStore({ client: clients.dynamodb, checkpointTable: deployment.checkpointTable, queryName: query });
  const all = (await store.list()).filter((r) => (!options.shardId || r.shardId === options.shardId)
    && (!options.firstSequenceNumber || r.firstSequenceNumber === options.firstSequenceNumber) && (options.only?.(r) ?? true));
  const expiredPlanned = (await store.list()).filter(isExpiredPlanned);
  const sourceStreams = new Set([deployment.streamName, ...Object.values(deployment.sourceStreams ?? {})]);
  const ledgerPk = `${query}#redrive`;
  const ledger = await queryAll(clients.dynamodb, {
    TableName: deployment.checkpointTable, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': { S: ledgerPk } }, ConsistentRead: true,
  }, undefined);
  const claimed = new Set(ledger.map((i) => i.sk!.S!));
  const redrivenAs = new Set(ledger.flatMap((i) => (i.newShardId?.S && i.newSequenceNumber?.S ? [idOf(i.newShardId.S, i.newSequenceNumber.S)] : [])));
  const deadLetters = new S3DeadLetterWriter({ client: clients.s3, bucket: deployment.deadLetterBucket, prefix: deployment.deadLetterPrefix ?? 'dead-letter/' });
  const report: { -readonly [K in keyof SkippedRedriveReport]: SkippedRedriveReport[K] } = {
    ranges: [], redriven: 0, deadLettered: 0, alreadyCommitted: 0, expired: 0, skippedAgain: 0, alreadyRedriven: 0,
  };
  for (const range of all) {
    const base = { partitionId: range.partitionId, shardId: range.shardId, first: range.firstSequenceNumber, last: range.lastSequenceNumber, reason: range.reason };
    if (range.state === 'redriven') { report.alreadyRedriven++; continue; }
    const records = await readRange(clients, range);
    // A batch that ran without its expired records commits their range but not them: they stay lost.
    const spans = withoutExpiredPlanned(await committedSpans(clients, deployment, range, options.maxBatchesBack ?? 1000),
      expiredPlanned.filter((r) => r.partitionId === range.partitionId));
    const committed = (sequenceNumber: string): boolean => inSpans(spans, BigInt(sequenceNumber));
    if (!sourceStreams.has(range.streamName)) {
      await redriveInternalRange(clients, deployment, store, range, records.filter((r) => !committed(r.sequenceNumber)), records.length, options, report);
      continue;
    }
    const loss = expiredLoss(range, records, spans);
    const outcome = {
      redriven: 0, deadLettered: 0, alreadyCommitted: loss.committed, expired: loss.lost, skippedAgain: 0,
      ...(loss.lost > 0 ? { expiredRange: loss.range! } : {}),
    };
    const letters: DeadLetterRecord[] = [];
    const toSend: ShardRecord[] = [];
    for (const record of records) {
      const id = idOf(range.shardId, record.sequenceNumber);
      if (committed(record.sequenceNumber)) { outcome.alreadyCommitted++; continue; }
      const letter = (reason: string): DeadLetterRecord => ({
        queryName: query, shardId: range.shardId, sequenceNumber: record.sequenceNumber, partitionKey: record.partitionKey,
        approximateArrivalTimestampMs: record.approximateArrivalTimestampMs, dataBase64: record.dataBase64, reason,
      });
      if (redrivenAs.has(id)) {
        outcome.skippedAgain++;
        letters.push(letter(`SKIPPED_AGAIN: skipped by the event source mapping again after a re-drive (${range.reason}); not re-driven twice`));
        continue;
      }
      const checked = options.check?.(Buffer.from(record.dataBase64, 'base64'), range.streamName) ?? { ok: true as const };
      if (!checked.ok) {
        outcome.deadLettered++;
        letters.push(letter(`skipped by the event source mapping (${range.reason}), then refused by the source: ${checked.reason}`));
        continue;
      }
      toSend.push(record);
    }
    if (options.dryRun) {
      report.ranges.push({ ...base, outcome: { ...outcome, redriven: toSend.length }, note: 'dry run: nothing changed' });
      accumulate(report, { ...outcome, redriven: toSend.length });
      continue;
    }
    if (letters.length > 0) await deadLetters.write(letters);
    for (const record of toSend) {
      const id = idOf(range.shardId, record.sequenceNumber);
      if (claimed.has(id) || !(await claim(clients, deployment.checkpointTable, ledgerPk, id))) continue;
      const put = await clients.kinesis.send(new PutRecordCommand({
        StreamName: range.streamName, PartitionKey: record.partitionKey, Data: Buffer.from(record.dataBase64, 'base64'),
      }));
      await clients.dynamodb.send(new UpdateItemCommand({
        TableName: deployment.checkpointTable, Key: { pk: { S: ledgerPk }, sk: { S: id } },
        UpdateExpression: 'SET newShardId = :s, newSequenceNumber = :q, redrivenAtMs = :t, fromSkippedRange = :r',
        ExpressionAttributeValues: {
          ':s': { S: put.ShardId! }, ':q': { S: put.SequenceNumber! }, ':t': { N: String(Date.now()) }, ':r': { S: `${range.partitionId}#${range.firstSequenceNumber}` },
        },
      }));
      outcome.redriven++;
    }
    // Records claimed by an earlier run that stopped halfway were sent then: count them as re-driven.
    outcome.redriven += toSend.filter((r) => claimed.has(idOf(range.shardId, r.sequenceNumber))).length;
    if (await store.markRedriven(range, outcome)) {
      report.ranges.push({ ...base, outcome });
      accumulate(report, outcome);
    } else {
      report.alreadyRedriven++;
    }
  }
  return report;
}

/** A range of an internal repartition stream: its records stage 2 never applied go back to its shard (lib/aws/internal-range-redrive.ts). */
async function redriveInternalRange(
  clients: AwsClients, deployment: DeploymentDescriptor, store: SkippedBatchStore, range: SkippedRange, pending: readonly ShardRecord[], held: number,
  options: SkippedRedriveOptions, report: { -readonly [K in keyof SkippedRedriveReport]: SkippedRedriveReport[K] },
): Promise<void> {
  const base = { partitionId: range.partitionId, shardId: range.shardId, first: range.firstSequenceNumber, last: range.lastSequenceNumber, reason: range.reason };
  const plan = await planInternalRedrive(clients, deployment, range, pending);
  const hashKey = plan && plan.send.length > 0 ? await openShardHashKey(clients, range.streamName, range.shardId) : '';
  if (plan === null || hashKey === null) {
    const why = plan === null ? 'what stage 2 applied before it is no longer in its offset log' : 'its shard is closed (the internal stream was resharded)';
    report.ranges.push({ ...base, outcome: null, note: `on the internal stream ${range.streamName}: not re-drivable, ${why}; ${pending.length} record(s) not committed` });
    return;
  }
  const outcome = {
    redriven: plan.send.length, deadLettered: plan.letters.length - plan.skippedAgain, alreadyCommitted: held - pending.length + plan.alreadyApplied + plan.idle,
    expired: Math.max(0, range.batchSize - held), skippedAgain: plan.skippedAgain,
  };
  if (options.dryRun) {
    report.ranges.push({ ...base, outcome, note: 'dry run: nothing changed' });
    accumulate(report, outcome);
    return;
  }
  if (plan.letters.length > 0) {
    await new S3DeadLetterWriter({ client: clients.s3, bucket: deployment.deadLetterBucket, prefix: deployment.deadLetterPrefix ?? 'dead-letter/' }).write(plan.letters);
  }
  // Sent again by a run that stopped before marking the range: stage 2 drops the second copy.
  await sendInternalRedrive(clients, range, hashKey!, plan);
  if (await store.markRedriven(range, outcome)) {
    report.ranges.push({ ...base, outcome });
    accumulate(report, outcome);
  } else {
    report.alreadyRedriven++;
  }
}

function accumulate(report: { redriven: number; deadLettered: number; alreadyCommitted: number; expired: number; skippedAgain: number }, o: Omit<SkippedRangeOutcome, 'atMs'>): void {
  report.redriven += o.redriven;
  report.deadLettered += o.deadLettered;
  report.alreadyCommitted += o.alreadyCommitted;
  report.expired += o.expired;
  report.skippedAgain += o.skippedAgain;
}

/**
 * What became of the range's records the stream no longer holds (retention trims a shard from its
 * oldest record, so they are the range's first, up to the first record still held). Those a batch
 * committed after all are not lost: a committed batch's offset names its first and last sequence
 * numbers and its record count, so the records of the gone part it holds are its count less its
 * records still readable. Lost: the others, in the parts of the gone prefix no committed batch
 * covers (`range`: from the first such part's start to the last one's end). A batch reaching
 * outside the range, over a gone part covered only partly, cannot be split exactly: it counts as
 * committing none of them there, so a loss may be over-reported, never under-reported.
 */
export function expiredLoss(
  range: SkippedRange, held: readonly ShardRecord[], spans: readonly CommittedSpan[],
): { lost: number; committed: number; range?: { first: string; last: string } } {
  const gone = Math.max(0, range.batchSize - held.length);
  if (gone === 0) return { lost: 0, committed: 0 };
  const first = BigInt(range.firstSequenceNumber);
  const last = BigInt(range.lastSequenceNumber);
  const firstHeld = held.reduce<bigint | null>((min, r) => (min === null || BigInt(r.sequenceNumber) < min ? BigInt(r.sequenceNumber) : min), null);
  const prefixEnd = firstHeld === null ? last : firstHeld - 1n;
  const uncovered = uncoveredParts(first, prefixEnd, spans);
  if (uncovered.length === 0) return { lost: 0, committed: gone };
  let committed = 0;
  for (const span of spans) {
    // Within the range: its records there are its count less those still held; else not split exactly.
    if (span.to < first || span.from > prefixEnd || span.from < first || span.to > last) continue;
    committed += Math.max(0, span.count - held.filter((r) => BigInt(r.sequenceNumber) <= span.to).length);
  }
  committed = Math.min(committed, gone);
  return { lost: gone - committed, committed, range: { first: String(uncovered[0]!.from), last: String(uncovered.at(-1)!.to) } };
}

/**
 * The committed spans less the records their batches lost to retention before committing (the
 * engine recorded them, the first of their batch): the rest of such a batch is committed, they are not.
 */
export function withoutExpiredPlanned(spans: readonly CommittedSpan[], lost: readonly Pick<SkippedRange, 'firstSequenceNumber' | 'lastSequenceNumber' | 'batchSize'>[]): CommittedSpan[] {
  return spans.flatMap((span) => {
    const loss = lost.find((l) => BigInt(l.firstSequenceNumber) === span.from);
    if (!loss) return [span];
    const lastLost = BigInt(loss.lastSequenceNumber);
    return lastLost >= span.to ? [] : [{ from: lastLost + 1n, to: span.to, count: Math.max(0, span.count - loss.batchSize) }];
  });
}

/** The parts of [from, to] no span covers, in order. */
function uncoveredParts(from: bigint, to: bigint, spans: readonly CommittedSpan[]): { from: bigint; to: bigint }[] {
  const parts: { from: bigint; to: bigint }[] = [];
  let next = from;
  for (const span of [...spans].sort((a, b) => (a.from < b.from ? -1 : a.from > b.from ? 1 : 0))) {
    if (span.to < next) continue;
    if (span.from > to) break;
    if (span.from > next) parts.push({ from: next, to: span.from - 1n });
    next = span.to + 1n;
    if (next > to) return parts;
  }
  if (next <= to) parts.push({ from: next, to });
  return parts;
}

/** The range's records the stream still holds (none once the shard is past retention). */
async function readRange(clients: AwsClients, range: SkippedRange): Promise<ShardRecord[]> {
  try {
    const records = await new KinesisShardReader(clients.kinesis, range.streamName).read(range.shardId, range.firstSequenceNumber, range.lastSequenceNumber);
    const first = BigInt(range.firstSequenceNumber);
    return records.filter((r) => BigInt(r.sequenceNumber) >= first);
  } catch (error) {
    // The shard (or the record the iterator starts at) is gone: everything in the range expired.
    if (/ResourceNotFound|InvalidArgument|Trimmed|expired/i.test(`${(error as Error).name} ${(error as Error).message}`)) return [];
    throw error;
  }
}

/** A committed batch of the range's partition: its first and last sequence numbers and its record count. */
export interface CommittedSpan {
  readonly from: bigint;
  readonly to: bigint;
  readonly count: number;
}

const inSpans = (spans: readonly CommittedSpan[], seq: bigint): boolean => spans.some((s) => s.from <= seq && seq <= s.to);

/** The committed batches of the range's partition that overlap it: newest first, back to the first one that ends before it. */
export async function committedSpans(
  clients: AwsClients, deployment: DeploymentDescriptor, range: SkippedRange, maxBatchesBack: number,
): Promise<CommittedSpan[]> {
  const checkpoint = checkpointOf(clients, deployment, range.partitionId);
  const latest = await checkpoint.commitLog.getLatest();
  const spans: CommittedSpan[] = [];
  const start = BigInt(range.firstSequenceNumber);
  const end = BigInt(range.lastSequenceNumber);
  for (let batchId = latest?.[0] ?? -1, seen = 0; batchId >= 0 && seen < maxBatchesBack; batchId--, seen++) {
    const planned = await checkpoint.offsetLog.get(batchId);
    const offset = asKinesisOffset(Object.values(planned?.offsets ?? {}).find((o) => o !== null) ?? null);
    if (!offset) break;
    const to = BigInt(offset.sequenceNumber);
    if (to < start) break;
    if (offset.firstSequenceNumber === undefined) continue;
    const from = BigInt(offset.firstSequenceNumber);
    // A batch without a count (older offsets) holds at least its first and last record.
    if (from <= end) spans.push({ from, to, count: offset.recordCount ?? (from === to ? 1 : 2) });
  }
  return spans;
}

/** Whether a sequence number of the range was committed by a batch of its partition after all. */
export async function committedWithin(
  clients: AwsClients, deployment: DeploymentDescriptor, range: SkippedRange, maxBatchesBack: number,
): Promise<(sequenceNumber: string) => boolean> {
  const store = new SkippedBatchStore({ client: clients.dynamodb, checkpointTable: deployment.checkpointTable, queryName: deployment.sluiceQuery });
  const expiredPlanned = (await store.list(range.partitionId)).filter(isExpiredPlanned);
  const spans = withoutExpiredPlanned(await committedSpans(clients, deployment, range, maxBatchesBack), expiredPlanned);
  return (sequenceNumber) => inSpans(spans, BigInt(sequenceNumber));
}

async function claim(clients: AwsClients, table: string, pk: string, id: string): Promise<boolean> {
  try {
    await clients.dynamodb.send(new PutItemCommand({
      TableName: table, Item: { pk: { S: pk }, sk: { S: id }, claimedAtMs: { N: String(Date.now()) } }, ConditionExpression: 'attribute_not_exists(pk)',
    }));
    return true;
  } catch (error) {
    if (error instanceof ConditionalCheckFailedException) return false;
    throw error;
  }
}
