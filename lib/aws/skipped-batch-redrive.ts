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
 *   - else re-driven, once, whichever re-drive runs (claimed in the ledger dead-letter re-drive
 *     uses, pk `${queryName}#redrive`):
 *       - through the query (`throughQuery`, the default of `sluice redrive --skipped`): the
 *         records, as a plain list, run as a pseudo-shard of their own (through-query-redrive.ts),
 *         and the source stream is not written, so no other consumer of it sees them twice. A
 *         one-stage stateful query runs them as re-drive batches of the open shards holding their
 *         keys' state (a closed shard's descendants, through-query-redrive.ts); a range some of
 *         whose records no shard can take (a split of a state not divisible by key) waits;
 *       - or put back into the source stream with their partition key (`intoStream`, opt-in:
 *         every consumer of the stream reads them again);
 *       - neither given: the range waits, nothing written, and the report says what to give.
 *
 * Records the stream no longer holds are counted as expired: lost, and said so (`expiredLoss`).
 * The range is then marked redriven with those counts, which is what makes `sluice status`
 * healthy. A run that stops halfway leaves the range waiting; the next run resumes its open run
 * with the same records (or finds its sent records claimed) and re-drives only the rest.
 *
 * Ranges on an internal repartition stream: records the scheduled drain has committed since (it
 * reads stage 2's shards from their committed position) are left; the others that stage 2 never
 * applied are put back on their shard tagged with the range, so stage 2 applies them once although
 * it has moved past their source batches (lib/aws/internal-range-redrive.ts).
 */
import { UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { PutRecordCommand } from '@aws-sdk/client-kinesis';
import type { DeploymentDescriptor } from '../runtime/runtime-config.js';
import { isMultiSource, sourcesOf, type QueryDefinition } from '../query/query-definition.js';
import { sourceSchemaOf } from '../query/validate-query.js';
import { createRecordDecoder } from '../sources/record-decoder.js';
import type { DeadLetterRecord } from '../sources/dead-letter.js';
import type { ShardRecord } from '../sources/kinesis-shard-source.js';
import { asKinesisOffset } from '../sources/kinesis-shard-source.js';
import type { AwsClients } from './clients.js';
import { KinesisShardReader } from './kinesis-shard-reader.js';
import { putItemOnce } from './dynamodb-cost.js';
import { checkpointOf } from './query-inspection.js';
import { S3DeadLetterWriter } from './s3-dead-letter-writer.js';
import { isExpiredPlanned, SkippedBatchStore, type SkippedRange, type SkippedRangeOutcome } from './skipped-batches.js';
import { openShardHashKey, planInternalRedrive, sendInternalRedrive } from './internal-range-redrive.js';
import {
  compileForRedrive, createThroughQueryRunner, ledgerPkOf, newRunId, openRunOf, pseudoShardOf, readRedriveLedger, redriveIdOf,
  type RedriveRecord, type RunnerOptions, type ThroughQueryRunner,
} from './through-query-redrive.js';

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
  /** The query's source decoder: undecodable records are dead-lettered instead of re-driven. */
  readonly check?: RecordCheck;
  /** Committed batches looked at per range, newest first (default 1,000). */
  readonly maxBatchesBack?: number;
  /**
   * A source range's records run through this query, in this process (through-query-redrive.ts);
   * the source stream is not written.
   */
  readonly throughQuery?: RunnerOptions & { readonly runId?: string };
  /** Put a source range's records back into the source stream instead: every consumer of the stream reads them again. */
  readonly intoStream?: boolean;
}

export interface SkippedRangeReport {
  readonly partitionId: string;
  readonly shardId: string;
  readonly first: string;
  readonly last: string;
  readonly reason: string;
  readonly outcome: Omit<SkippedRangeOutcome, 'atMs'> | null;
  /** The re-drive runs through the query that took the range's records (a pseudo-shard each). */
  readonly runs?: readonly SkippedRangeRun[];
  /** Why it was not re-driven (an internal stream's range, a dry run). */
  readonly note?: string;
}

export interface SkippedRangeRun {
  readonly partitionId: string;
  readonly records: number;
  /** Left open by an earlier re-drive that stopped, and finished by this one. */
  readonly resumed: boolean;
  readonly batches: number;
}

export interface SkippedRedriveReport {
  /** Where a source range's records went: through the query, back into the stream, or nowhere (no way given). */
  readonly into: 'query' | 'stream' | null;
  readonly ranges: SkippedRangeReport[];
  readonly redriven: number;
  readonly deadLettered: number;
  readonly alreadyCommitted: number;
  readonly expired: number;
  readonly skippedAgain: number;
  /** Ranges redriven by an earlier run (left alone). */
  readonly alreadyRedriven: number;
}

type MutableReport = { -readonly [K in keyof SkippedRedriveReport]: SkippedRedriveReport[K] };
type Outcome = { -readonly [K in keyof Omit<SkippedRangeOutcome, 'atMs'>]: Omit<SkippedRangeOutcome, 'atMs'>[K] };
type Ledger = Awaited<ReturnType<typeof readRedriveLedger>>;

export async function redriveSkippedBatches(
  clients: AwsClients, deployment: DeploymentDescriptor, options: SkippedRedriveOptions = {},
): Promise<SkippedRedriveReport> {
  const query = deployment.sluiceQuery;
  if (options.throughQuery && options.intoStream) throw new Error('through the query or into the stream, not both');
  // Refused before any AWS call.
  if (options.throughQuery) compileForRedrive(options.throughQuery.definition, options.throughQuery.config, query);
  const store = new SkippedBatchStore({ client: clients.dynamodb, checkpointTable: deployment.checkpointTable, queryName: query });
  const all = (await store.list()).filter((r) => (!options.shardId || r.shardId === options.shardId)
    && (!options.firstSequenceNumber || r.firstSequenceNumber === options.firstSequenceNumber) && (options.only?.(r) ?? true));
  const expiredPlanned = (await store.list()).filter(isExpiredPlanned);
  const sourceStreams = new Set([deployment.streamName, ...Object.values(deployment.sourceStreams ?? {})]);
  const ledger = await readRedriveLedger(clients, deployment);
  const report: MutableReport = {
    into: options.throughQuery ? 'query' : options.intoStream ? 'stream' : null,
    ranges: [], redriven: 0, deadLettered: 0, alreadyCommitted: 0, expired: 0, skippedAgain: 0, alreadyRedriven: 0,
  };
  let runner: Promise<ThroughQueryRunner> | undefined;
  const context: SourceRangeContext = {
    clients, deployment, store, ledger, options, report,
    runner: () => (runner ??= createThroughQueryRunner(clients, deployment, options.throughQuery!)),
    runIds: (() => { const runId = options.throughQuery?.runId ?? newRunId(); let n = 0; return () => `${runId}.${++n}`; })(),
  };
  for (const range of all) {
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
    await redriveSourceRange(context, range, records, spans);
  }
  return report;
}

interface SourceRangeContext {
  readonly clients: AwsClients;
  readonly deployment: DeploymentDescriptor;
  readonly store: SkippedBatchStore;
  readonly ledger: Ledger;
  readonly options: SkippedRedriveOptions;
  readonly report: MutableReport;
  readonly runner: () => Promise<ThroughQueryRunner>;
  readonly runIds: () => string;
}

/** A range of a source stream: per record, left (committed), dead-lettered, or re-driven once; then the range's outcome. */
async function redriveSourceRange(c: SourceRangeContext, range: SkippedRange, records: readonly ShardRecord[], spans: readonly CommittedSpan[]): Promise<void> {
  const { options, report } = c;
  const base = { partitionId: range.partitionId, shardId: range.shardId, first: range.firstSequenceNumber, last: range.lastSequenceNumber, reason: range.reason };
  const loss = expiredLoss(range, records, spans);
  const outcome: Outcome = {
    redriven: 0, deadLettered: 0, alreadyCommitted: loss.committed, expired: loss.lost, skippedAgain: 0,
    ...(loss.lost > 0 ? { expiredRange: loss.range! } : {}),
  };
  const letters: DeadLetterRecord[] = [];
  const due: RedriveRecord[] = [];
  for (const record of records) {
    const id = redriveIdOf(range.shardId, record.sequenceNumber);
    if (inSpans(spans, BigInt(record.sequenceNumber))) { outcome.alreadyCommitted++; continue; }
    const letter = (reason: string): DeadLetterRecord => ({
      queryName: c.deployment.sluiceQuery, shardId: range.shardId, sequenceNumber: record.sequenceNumber, partitionKey: record.partitionKey,
      approximateArrivalTimestampMs: record.approximateArrivalTimestampMs, dataBase64: record.dataBase64, reason,
    });
    if (c.ledger.newIds.has(id)) {
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
    due.push({ ...record, shardId: range.shardId });
  }
  if (report.into === null && due.length > 0) {
    // Nothing is written: the range waits for a re-drive that says where its records go.
    report.ranges.push({ ...base, outcome: null, note: `${due.length} record(s) to re-drive: give --query-module <file> to run them through the query, `
      + 'or --into-stream to put them back into the source stream' });
    return;
  }
  if (report.into === 'query' && due.length > 0) {
    // A stateful source stage: each record needs an open shard holding its key's state.
    const fresh = due.filter((r) => !c.ledger.claims.has(redriveIdOf(r.shardId, r.sequenceNumber)));
    const routed = await (await c.runner()).route(fresh, !options.dryRun);
    const blocked = [...new Set([...routed.refused.map((r) => `cannot be re-driven through the query: ${r.reason}`),
      ...routed.waiting.map((w) => `waits: shard ${w.shardId} waits for its parents (${w.reason}); run the re-drive again later`)])];
    if (blocked.length > 0) {
      report.ranges.push({ ...base, outcome: null, note: `${routed.refused.length + routed.waiting.reduce((n, w) => n + w.records.length, 0)} record(s) ${blocked.join('; ')}`
        + (routed.refused.length > 0 ? ' (--into-stream puts them back into the source stream instead)' : '') });
      return;
    }
  }
  if (options.dryRun) {
    report.ranges.push({ ...base, outcome: { ...outcome, redriven: due.length }, note: 'dry run: nothing changed' });
    accumulate(report, { ...outcome, redriven: due.length });
    return;
  }
  if (letters.length > 0) {
    await new S3DeadLetterWriter({ client: c.clients.s3, bucket: c.deployment.deadLetterBucket, prefix: c.deployment.deadLetterPrefix ?? 'dead-letter/' }).write(letters);
  }
  const runs = report.into === 'query' ? await runThroughQuery(c, range, due) : [];
  if (report.into === 'stream') await putBack(c, range, due);
  // Every due record went once: by this run, by a run this one resumed, or by an earlier re-drive that claimed it.
  outcome.redriven = due.length;
  if (await c.store.markRedriven(range, outcome)) {
    report.ranges.push({ ...base, outcome, ...(runs.length > 0 ? { runs } : {}) });
    accumulate(report, outcome);
  } else {
    report.alreadyRedriven++;
  }
}

/**
 * The range's due records through the query: first a run of this range an earlier re-drive left
 * open (its records again, in its order), then one run for those no run has claimed.
 */
async function runThroughQuery(c: SourceRangeContext, range: SkippedRange, due: readonly RedriveRecord[]): Promise<SkippedRangeRun[]> {
  const rangeKey = `${range.partitionId}#${range.firstSequenceNumber}`;
  const byId = new Map(due.map((r) => [redriveIdOf(r.shardId, r.sequenceNumber), r]));
  const runs: SkippedRangeRun[] = [];
  for (const item of c.ledger.runs.filter((i) => i.range?.S === rangeKey)) {
    const open = openRunOf(item, c.ledger.claims);
    if (!open) continue;
    const records = open.ids.map((id) => byId.get(id)).filter((r): r is RedriveRecord => r !== undefined);
    if (records.length !== open.ids.length) {
      throw new Error(`re-drive ${open.partitionId} of the skipped range ${range.partitionId} ${range.firstSequenceNumber}..${range.lastSequenceNumber}: `
        + `${open.ids.length - records.length} of its records are no longer in the stream (run stopped before its commit)`);
    }
    runs.push({ partitionId: open.partitionId, records: records.length, resumed: true, batches: (await (await c.runner()).finish(open.partitionId, records)).batches });
  }
  const fresh = due.filter((r) => !c.ledger.claims.has(redriveIdOf(r.shardId, r.sequenceNumber)));
  if (fresh.length > 0) {
    const runner = await c.runner();
    // One run per shard the records run on (a closed shard's records: its descendants holding their keys).
    const routed = await runner.route(fresh, true);
    if (routed.refused.length > 0 || routed.waiting.length > 0) throw new Error(`the shards of ${rangeKey} changed during the re-drive: run it again`);
    for (const [shardId, records] of routed.byShard) {
      const partitionId = pseudoShardOf(shardId, c.runIds());
      const mine = await runner.open(partitionId, records, { range: { S: rangeKey } });
      runs.push({ partitionId, records: mine.length, resumed: false, batches: (await runner.finish(partitionId, mine)).batches });
    }
  }
  return runs;
}

/** `--into-stream`: each due record back into the source stream with its partition key, claimed first so none is sent twice. */
async function putBack(c: SourceRangeContext, range: SkippedRange, due: readonly RedriveRecord[]): Promise<void> {
  const table = c.deployment.checkpointTable;
  const pk = ledgerPkOf(c.deployment.sluiceQuery);
  for (const record of due) {
    const id = redriveIdOf(range.shardId, record.sequenceNumber);
    if (c.ledger.claims.has(id) || !(await putItemOnce(c.clients.dynamodb, table, { pk: { S: pk }, sk: { S: id }, claimedAtMs: { N: String(Date.now()) } }))) continue;
    const put = await c.clients.kinesis.send(new PutRecordCommand({
      StreamName: range.streamName, PartitionKey: record.partitionKey, Data: Buffer.from(record.dataBase64, 'base64'),
    }));
    await c.clients.dynamodb.send(new UpdateItemCommand({
      TableName: table, Key: { pk: { S: pk }, sk: { S: id } },
      UpdateExpression: 'SET newShardId = :s, newSequenceNumber = :q, redrivenAtMs = :t, fromSkippedRange = :r',
      ExpressionAttributeValues: {
        ':s': { S: put.ShardId! }, ':q': { S: put.SequenceNumber! }, ':t': { N: String(Date.now()) }, ':r': { S: `${range.partitionId}#${range.firstSequenceNumber}` },
      },
    }));
  }
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
    redriven: plan.send.length, deadLettered: plan.letters.length - plan.skippedAgain, alreadyCommitted: held - pending.length + plan.alreadyApplied + plan.idle + plan.otherNamespace,
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
