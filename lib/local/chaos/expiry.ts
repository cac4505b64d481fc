/**
 * 'skipped-then-expired': a batch the event source mapping gave up (an outage outlasting its
 * retries) whose records leave the stream's retention before anyone re-drives them.
 *
 * Retention loss is outside Sluice's control. What "nothing lost" means here: nothing is lost
 * SILENTLY. For every such range the harness checks, as an operator would see it:
 *   1. the on-failure function recorded it, and `sluice status` is unhealthy and lists it;
 *   2. `sluice redrive --skipped` (its library call) reports exactly its records no batch committed
 *      as expired (those a batch committed after all are not lost), inside the sequence numbers it
 *      names as lost, and puts nothing back;
 *   3. afterwards `sluice status` is still unhealthy, naming the lost sequence numbers;
 *   4. the shard went on: the sink equals the in-memory engine's answer over every record except
 *      the lost ones (records of the range a batch committed after all are not lost), so nothing
 *      beyond the reported ranges is missing, duplicated or wrong (checked by the caller).
 *
 * The expiry is simulated on the re-drive's Kinesis client (emulators keep records for ever):
 * GetRecords leaves out the records of the expired ranges, as after the trim horizon passed them.
 */
import type { DeploymentDescriptor } from '../../runtime/runtime-config.js';
import { createAwsClients, type AwsClientOptions, type AwsClients } from '../../aws/clients.js';
import { inspectQuery } from '../../aws/query-inspection.js';
import { committedWithin, redriveSkippedBatches } from '../../aws/skipped-batch-redrive.js';
import { SkippedBatchStore, type SkippedRange } from '../../aws/skipped-batches.js';
import { emptyDiff, type Diff } from './compare.js';

/** A record a source function failed on every time: its stream, shard, sequence number and payload. */
export interface OutageRecord {
  readonly streamName: string;
  readonly shardId: string;
  readonly sequenceNumber: string;
  readonly data: string;
}

/** A batch the mapping gave up, with its records (what the on-failure destination was told, and the records, which the harness knows). */
export interface GivenUpBatch {
  readonly streamName: string;
  readonly shardId: string;
  readonly first: string;
  readonly last: string;
  readonly records: readonly { readonly sequenceNumber: string; readonly data: string }[];
}

export interface ExpiryOutcome {
  /** Payloads lost to retention (never committed, not poison): the expected answer leaves them out. */
  readonly lost: readonly string[];
  /** The same records by stream, shard and sequence number (what retention-loss.ts merges with the engine's own records of loss). */
  readonly lostRecords: readonly { readonly streamName: string; readonly shardId: string; readonly sequenceNumber: string }[];
  /** Skipped ranges that expired, and the records the re-drive reported expired in them. */
  readonly ranges: number;
  readonly reportedExpired: number;
  /** Accounting failures (a loss not reported, or reported wrongly), counted as lost. */
  readonly diff: Diff;
}

const inRange = (r: Pick<SkippedRange, 'firstSequenceNumber' | 'lastSequenceNumber'>, seq: string): boolean =>
  BigInt(r.firstSequenceNumber) <= BigInt(seq) && BigInt(seq) <= BigInt(r.lastSequenceNumber);

export async function expireAndRedrive(options: {
  readonly clients: AwsClients;
  readonly clientOptions: AwsClientOptions;
  readonly deployment: DeploymentDescriptor;
  readonly outage: readonly OutageRecord[];
  readonly gaveUp: readonly GivenUpBatch[];
  readonly poison: ReadonlySet<string>;
}): Promise<ExpiryOutcome> {
  const { clients, deployment } = options;
  const diff = emptyDiff();
  const fail = (text: string, records = 1): void => { diff.lost += records; if (diff.examples.length < 6) diff.examples.push(text); };
  const store = new SkippedBatchStore({ client: clients.dynamodb, checkpointTable: deployment.checkpointTable, queryName: deployment.sluiceQuery });
  const expiring = (await store.list()).filter((r) => r.state === 'waiting'
    && options.outage.some((o) => o.streamName === r.streamName && o.shardId === r.shardId && inRange(r, o.sequenceNumber)));
  if (expiring.length === 0) return { lost: [], lostRecords: [], ranges: 0, reportedExpired: 0, diff };

  // 1. Recorded and shown by status before anyone re-drives.
  // A loss an operator is not shown counts as lost: its records.
  const before = await inspectQuery(clients, deployment);
  for (const r of expiring) {
    const listed = before.skippedRanges.some((w) => w.partitionId === r.partitionId && w.firstSequenceNumber === r.firstSequenceNumber);
    if (before.healthy || !listed) {
      fail(`status (${before.healthy ? 'healthy' : 'unhealthy'}) does not show the waiting skipped range ${r.partitionId} ${r.firstSequenceNumber}..${r.lastSequenceNumber}`, r.batchSize);
    }
  }

  // 2. The re-drive after retention passed them.
  const lost: string[] = [];
  const lostRecords: { streamName: string; shardId: string; sequenceNumber: string }[] = [];
  let reportedExpired = 0;
  /** Ranges with records no batch committed: those status must report lost (and only those). */
  const reallyLost = new Set<SkippedRange>();
  const redriveClients = expiredView(options.clientOptions, expiring);
  try {
    const key = (partitionId: string, first: string): string => `${partitionId}#${first}`;
    const wanted = new Set(expiring.map((r) => key(r.partitionId, r.firstSequenceNumber)));
    const report = await redriveSkippedBatches(redriveClients, deployment, { only: (r) => wanted.has(key(r.partitionId, r.firstSequenceNumber)) });
    for (const r of expiring) {
      const outcome = report.ranges.find((x) => x.partitionId === r.partitionId && x.first === r.firstSequenceNumber)?.outcome;
      reportedExpired += outcome?.expired ?? 0;
      const batch = options.gaveUp.find((g) => g.streamName === r.streamName && g.shardId === r.shardId && g.first === r.firstSequenceNumber && g.last === r.lastSequenceNumber);
      if (!batch) { fail(`no given-up batch of the mapping matches the recorded range ${r.firstSequenceNumber}..${r.lastSequenceNumber}`, r.batchSize); continue; }
      // Exactly the range's records no batch committed are reported expired, inside the reported sequence numbers.
      const committed = await committedWithin(clients, deployment, r, 1000);
      const uncommitted = batch.records.filter((record) => !committed(record.sequenceNumber));
      const within = (seq: string): boolean => outcome?.expiredRange !== undefined && inRange({ firstSequenceNumber: outcome.expiredRange.first, lastSequenceNumber: outcome.expiredRange.last }, seq);
      if (!outcome || outcome.expired !== uncommitted.length || outcome.redriven !== 0 || !uncommitted.every((u) => within(u.sequenceNumber))) {
        fail(`the re-drive of expired range ${r.partitionId} ${r.firstSequenceNumber}..${r.lastSequenceNumber} (${r.batchSize} records, `
          + `${uncommitted.length} not committed) reported ${JSON.stringify(outcome ?? null)}`, r.batchSize);
      }
      if (uncommitted.length > 0) reallyLost.add(r);
      // What is really gone: the range's records no batch committed (poison never reaches a sink anyway).
      for (const record of uncommitted) {
        if (options.poison.has(record.data)) continue;
        lost.push(record.data);
        lostRecords.push({ streamName: r.streamName, shardId: r.shardId, sequenceNumber: record.sequenceNumber });
      }
    }
  } finally {
    redriveClients.destroy();
  }

  // 3. Still unhealthy afterwards, naming the lost sequence numbers.
  const after = await inspectQuery(clients, deployment);
  for (const r of expiring) {
    const reported = after.lostRanges.some((l) => l.partitionId === r.partitionId && l.firstSequenceNumber === r.firstSequenceNumber)
      && after.problems.some((p) => p.includes(`${r.firstSequenceNumber}..${r.lastSequenceNumber}`) && /lost/.test(p));
    if (!reallyLost.has(r)) {
      if (after.lostRanges.some((l) => l.partitionId === r.partitionId && l.firstSequenceNumber === r.firstSequenceNumber)) {
        fail(`status reports the range ${r.partitionId} ${r.firstSequenceNumber}..${r.lastSequenceNumber} lost, although a batch committed all its records`, r.batchSize);
      }
    } else if (after.healthy || !reported) {
      fail(`status (${after.healthy ? 'healthy' : 'unhealthy'}) does not report the lost range ${r.partitionId} ${r.firstSequenceNumber}..${r.lastSequenceNumber}`, r.batchSize);
    }
  }
  return { lost, lostRecords, ranges: expiring.length, reportedExpired, diff };
}

/** Clients whose GetRecords no longer returns the records of `expired` ranges (past the trim horizon). */
function expiredView(clientOptions: AwsClientOptions, expired: readonly SkippedRange[]): AwsClients {
  const clients = createAwsClients(clientOptions);
  const shardOfIterator = new Map<string, { streamName: string; shardId: string }>();
  clients.kinesis.middlewareStack.add((next, context) => async (args) => {
    const command = (context as { commandName?: string }).commandName;
    const input = args.input as { StreamName?: string; ShardId?: string; ShardIterator?: string };
    const result = await next(args);
    const output = result.output as { ShardIterator?: string; NextShardIterator?: string; Records?: { SequenceNumber?: string }[] };
    if (command === 'GetShardIteratorCommand' && output.ShardIterator) {
      shardOfIterator.set(output.ShardIterator, { streamName: input.StreamName ?? '', shardId: input.ShardId ?? '' });
    }
    if (command === 'GetRecordsCommand' && input.ShardIterator) {
      const shard = shardOfIterator.get(input.ShardIterator);
      if (shard && output.NextShardIterator) shardOfIterator.set(output.NextShardIterator, shard);
      if (shard && output.Records) {
        output.Records = output.Records.filter((rec) => !expired.some((r) => r.streamName === shard.streamName && r.shardId === shard.shardId
          && inRange(r, rec.SequenceNumber ?? '0')));
      }
    }
    return result;
  }, { step: 'initialize', name: 'chaosRetentionPassed' });
  return clients;
}
