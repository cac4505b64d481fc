/**
 * Acknowledging a loss (`sluice redrive <query> --acknowledge <range> | --all-lost --reason "..."`):
 * records of a skipped range that expired from the stream before its re-drive read them are gone,
 * and `sluice status` says so (unhealthy) until a person records, in the range's item of the
 * checkpoint table, who saw it, when and why. Status then lists the loss as acknowledged and is
 * healthy again; nothing else changes, and an acknowledgement is never overwritten.
 */
import type { DeploymentDescriptor } from '../runtime/runtime-config.js';
import type { AwsClients } from './clients.js';
import { isLostRange, SkippedBatchStore, type SkippedRange } from './skipped-batches.js';

export interface AcknowledgeOptions {
  /** The range: its first sequence number, or `<partition>#<first>`; absent: every lost range. */
  readonly range?: string;
  readonly shardId?: string;
  readonly reason: string;
  readonly by: string;
  readonly dryRun?: boolean;
  readonly nowMs?: number;
}

export interface AcknowledgeReport {
  readonly acknowledged: SkippedRange[];
  readonly alreadyAcknowledged: SkippedRange[];
  /** Lost ranges not acknowledged and not named (for the message when the named one is unknown). */
  readonly unmatched: SkippedRange[];
}

export async function acknowledgeLostRanges(clients: AwsClients, deployment: DeploymentDescriptor, options: AcknowledgeOptions): Promise<AcknowledgeReport> {
  const store = new SkippedBatchStore({ client: clients.dynamodb, checkpointTable: deployment.checkpointTable, queryName: deployment.sluiceQuery });
  const lost = (await store.list()).filter((r) => isLostRange(r) && (!options.shardId || r.shardId === options.shardId));
  const named = (r: SkippedRange): boolean => options.range === undefined
    || options.range === r.firstSequenceNumber || options.range === `${r.partitionId}#${r.firstSequenceNumber}`;
  const report: AcknowledgeReport = { acknowledged: [], alreadyAcknowledged: [], unmatched: lost.filter((r) => !named(r) && !r.acknowledgement) };
  const acknowledgement = { by: options.by, atMs: options.nowMs ?? Date.now(), reason: options.reason };
  for (const range of lost.filter(named)) {
    if (range.acknowledgement) report.alreadyAcknowledged.push(range);
    else if (options.dryRun || await store.acknowledge(range, acknowledgement)) report.acknowledged.push({ ...range, acknowledgement });
    else report.alreadyAcknowledged.push(range);
  }
  return report;
}
