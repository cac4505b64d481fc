/**
 * Putting back a skipped range of an internal repartition stream (a stage-2 batch the event source
 * mapping gave up on). Stage 2 applies each (source shard, batch, part) once and moves past a
 * source's batch for good, so a record put back as it was would be dropped as a duplicate. Each
 * record of the range that stage 2 never applied is put back on the same shard tagged with the
 * range (`RepartitionRecord.redrive`): stage 2 applies it under that range's own progress entry,
 * once, whatever the re-drive runs (a second copy is a duplicate there), and leaves it out of the
 * watermark (its rows arrive late and are handled as late rows, as a late source record would).
 *
 * Which records stage 2 never applied: replaying the range on the progress stage 2 had committed
 * just before it drops the duplicates of records applied before it or earlier in it; a record
 * whose copy stage 2 committed after the range (a PutRecords retry landing past it) is dropped too.
 * Stage 1 sends all copies of a batch before any record of its next batch, so nothing else can
 * have applied it.
 *
 * The internal stream has one other reader: a replay's shadow run (its records carry its namespace,
 * `RepartitionRecord.ns`), which reads the stream itself, not through the event source mapping, so
 * a batch the mapping gave up is not skipped for it. A record of another namespace in the range is
 * left alone: put back, the shadow would apply it a second time.
 */
import { ListShardsCommand, PutRecordCommand } from '@aws-sdk/client-kinesis';
import type { DeploymentDescriptor } from '../runtime/runtime-config.js';
import { REPARTITION_SOURCE_NAME, hopRelationId } from '../query/query-stage.js';
import type { DeadLetterRecord } from '../sources/dead-letter.js';
import { internalStreamLetterShard } from '../sources/held-out-rows.js';
import type { ShardRecord } from '../sources/kinesis-shard-source.js';
import type { RepartitionOffset } from '../sources/repartition-shard-source.js';
import { applyRepartitionRecord, decodeRepartitionRecord, encodeRepartitionRecord, type RepartitionRecord, type SourceProgress } from '../sources/repartition-records.js';
import type { AwsClients } from './clients.js';
import { KinesisShardReader } from './kinesis-shard-reader.js';
import { checkpointOf } from './query-inspection.js';
import type { SkippedRange } from './skipped-batches.js';

export interface InternalRedrivePlan {
  /** Records to put back, tagged with the range. */
  readonly send: { readonly partitionKey: string; readonly data: Uint8Array }[];
  readonly letters: DeadLetterRecord[];
  /** Applied by stage 2 after all (a copy before, in or after the range). */
  readonly alreadyApplied: number;
  /** Put back once before and skipped again: dead-lettered, never put back in a loop. */
  readonly skippedAgain: number;
  /** Idle announcements: nothing to put back (later records carry their watermark on). */
  readonly idle: number;
  /** Records of another namespace (a replay's shadow run, which reads them itself): left alone. */
  readonly otherNamespace: number;
}

/** The stage-2 view a record belongs to (one per hop input). */
const viewOf = (record: RepartitionRecord): string => (record.in === undefined ? REPARTITION_SOURCE_NAME : hopRelationId(record.in));
const partKey = (r: RepartitionRecord): string => `${viewOf(r)}|${r.src}|${r.batch}|${r.part}`;

/** What to put back of the range; null when stage 2's progress before it is no longer known (a person decides). */
export async function planInternalRedrive(
  clients: AwsClients, deployment: DeploymentDescriptor, range: SkippedRange, records: readonly ShardRecord[],
): Promise<InternalRedrivePlan | null> {
  // The live run's records carry no namespace, unless a replay's cutover made another one live (aws-backends.ts).
  const live = deployment.activeNamespace === undefined || deployment.activeNamespace === deployment.sluiceQuery ? undefined : deployment.activeNamespace;
  const { before, committedEnd } = await committedAround(clients, deployment, range);
  if (before === null) return null;
  const appliedAfter = new Set<string>();
  if (committedEnd !== null && committedEnd > BigInt(range.lastSequenceNumber)) {
    const later = await new KinesisShardReader(clients.kinesis, range.streamName).read(range.shardId, range.lastSequenceNumber, committedEnd.toString());
    for (const r of later) {
      if (BigInt(r.sequenceNumber) <= BigInt(range.lastSequenceNumber)) continue;
      const decoded = tryDecode(r);
      // Another namespace's batch ids are its own: its records say nothing of the live run's.
      if (decoded?.kind === 'rows' && decoded.ns === live) appliedAfter.add(partKey(decoded));
    }
  }
  const progress = new Map<string, Record<string, SourceProgress>>(Object.entries(before).map(([view, p]) => [view, { ...p }]));
  const plan = { send: [] as InternalRedrivePlan['send'], letters: [] as DeadLetterRecord[], alreadyApplied: 0, skippedAgain: 0, idle: 0, otherNamespace: 0 };
  const rangeId = `${range.shardId}/${range.firstSequenceNumber}`;
  for (const record of records) {
    const letter = (reason: string): DeadLetterRecord => ({
      queryName: deployment.sluiceQuery, shardId: internalStreamLetterShard(range.shardId), sequenceNumber: record.sequenceNumber, partitionKey: record.partitionKey,
      approximateArrivalTimestampMs: record.approximateArrivalTimestampMs, dataBase64: record.dataBase64, reason,
    });
    const decoded = tryDecode(record);
    if (decoded === null) {
      plan.letters.push(letter(`skipped by the event source mapping (${range.reason}); not a Sluice repartition record`));
      continue;
    }
    if (decoded.ns !== live) { plan.otherNamespace++; continue; }
    if (decoded.kind === 'idle') { plan.idle++; continue; }
    if (decoded.redrive !== undefined) {
      plan.skippedAgain++;
      plan.letters.push(letter(`SKIPPED_AGAIN: skipped by the event source mapping again after a re-drive (${range.reason}); not re-driven twice`));
      continue;
    }
    let view = progress.get(viewOf(decoded));
    if (!view) progress.set(viewOf(decoded), view = {});
    if (applyRepartitionRecord(view, decoded) === null || appliedAfter.has(partKey(decoded))) {
      plan.alreadyApplied++;
      continue;
    }
    plan.send.push({ partitionKey: record.partitionKey, data: encodeRepartitionRecord({ ...decoded, redrive: rangeId }) });
  }
  return plan;
}

function tryDecode(record: ShardRecord): RepartitionRecord | null {
  try {
    return decodeRepartitionRecord(Buffer.from(record.dataBase64, 'base64'));
  } catch {
    return null;
  }
}

/**
 * Stage 2's committed progress (per view) just before the range (null when the offset log no
 * longer holds it), and the last sequence number it has committed on the shard (null: nothing).
 */
async function committedAround(
  clients: AwsClients, deployment: DeploymentDescriptor, range: SkippedRange,
): Promise<{ before: Record<string, Record<string, SourceProgress>> | null; committedEnd: bigint | null }> {
  const checkpoint = checkpointOf(clients, deployment, range.partitionId);
  const latest = await checkpoint.commitLog.getLatest();
  const start = BigInt(range.firstSequenceNumber);
  let committedEnd: bigint | null = null;
  for (let batchId = latest?.[0] ?? -1; batchId >= 0; batchId--) {
    const planned = await checkpoint.offsetLog.get(batchId);
    // Purged (older than the logs keep): what stage 2 applied before the range is not known.
    if (!planned) return { before: null, committedEnd };
    const offsets = Object.entries(planned.offsets)
      .filter((e): e is [string, NonNullable<(typeof e)[1]>] => e[1] !== null)
      .map(([view, o]) => [view, o as unknown as RepartitionOffset] as const);
    if (offsets.length === 0) return { before: null, committedEnd };
    const end = offsets.reduce((m, [, o]) => (BigInt(o.sequenceNumber) > m ? BigInt(o.sequenceNumber) : m), -1n);
    committedEnd ??= end;
    if (end < start) return { before: Object.fromEntries(offsets.map(([view, o]) => [view, o.sources ?? {}])), committedEnd };
  }
  return { before: {}, committedEnd };
}

/** The starting hash key of the shard, when it is still open (a closed one takes no records). */
export async function openShardHashKey(clients: AwsClients, streamName: string, shardId: string): Promise<string | null> {
  let token: string | undefined;
  do {
    const page = await clients.kinesis.send(new ListShardsCommand(token ? { NextToken: token } : { StreamName: streamName }));
    const shard = (page.Shards ?? []).find((s) => s.ShardId === shardId);
    if (shard) return shard.SequenceNumberRange?.EndingSequenceNumber === undefined ? shard.HashKeyRange!.StartingHashKey! : null;
    token = page.NextToken;
  } while (token);
  return null;
}

/** Puts the planned records back on the range's shard, in their order. */
export async function sendInternalRedrive(clients: AwsClients, range: SkippedRange, hashKey: string, plan: InternalRedrivePlan): Promise<void> {
  for (const record of plan.send) {
    await clients.kinesis.send(new PutRecordCommand({
      StreamName: range.streamName, PartitionKey: record.partitionKey, ExplicitHashKey: hashKey, Data: record.data,
    }));
  }
}
