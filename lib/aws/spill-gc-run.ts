/**
 * Runs the spill collector (lib/aws/dynamodb-spill-gc.ts) for a deployed query whose DynamoDB sink
 * spills: over every namespace's sink table and spill prefix that the pointer item names (the live
 * one, a replay's shadow, the retired ones kept for rollback), under the lease
 * (lib/aws/spill-gc-lease.ts). The scheduled function runs it after a tick, at most once per
 * `minIntervalMs`; `sluice spill gc` runs it on demand (a dry run takes no lease: it writes nothing).
 */
import type { QueryDefinition } from '../query/query-definition.js';
import type { CostMeter } from '../core/cost-meter.js';
import { sinkPrefixFor, type RuntimeConfig } from '../runtime/runtime-config.js';
import type { AwsClients } from './clients.js';
import { collectSpillGarbage, type SpillGcReport } from './dynamodb-spill-gc.js';
import { claimSpillGcLease, releaseSpillGcLease } from './spill-gc-lease.js';
import { readNamespacePointer, type NamespaceLocation } from './query-namespace.js';

/** How often the scheduled function collects (each run scans the sink tables in full). */
export const DEFAULT_SPILL_GC_INTERVAL_MS = 24 * 3600_000;
/** A run on demand holds the lease this long and stops its deletes before it runs out. */
export const DEFAULT_SPILL_GC_LEASE_MS = 15 * 60_000;
/** Kept free before the lease ends: a delete request started before it ends in time. */
const LEASE_MARGIN_MS = 20_000;

export interface SpillGcRunOptions {
  readonly queryName: string;
  /** The deployment's configuration (not a namespace's): its sink table and bucket. */
  readonly config: Pick<RuntimeConfig, 'checkpointTable' | 'sinkBucket' | 'sinkTable'> & { readonly sinkPrefix?: string };
  readonly clients: AwsClients;
  readonly meter?: CostMeter;
  readonly dryRun?: boolean;
  readonly graceMs?: number;
  readonly now?: () => number;
  /** The lease's length (the scheduled function: the time its invocation has left). */
  readonly leaseMs?: number;
  /** The scheduled function's time left (Lambda's `getRemainingTimeInMillis`): the run stops before it runs out. */
  readonly remainingMs?: () => number;
  /** 0 on demand; the scheduled function's interval. */
  readonly minIntervalMs?: number;
  readonly afterScan?: () => Promise<void>;
}

export type SpillGcRun = SpillGcReport | { readonly skipped: 'not-due-or-running' };

/** True when the query's sink spills to S3 (only then is there anything to collect). */
export function spillsToS3(definition: QueryDefinition, config: Pick<RuntimeConfig, 'sinkBucket' | 'sinkTable'>): boolean {
  const sink = definition.sink;
  return sink.kind === 'dynamodb' && sink.onUnwritableRow === 'spill' && !!config.sinkBucket && !!config.sinkTable;
}

/** Null when the deployment has no sink table and bucket (nothing spills). */
export async function runSpillGc(options: SpillGcRunOptions): Promise<SpillGcRun | null> {
  const { config, clients } = options;
  if (!config.sinkBucket || !config.sinkTable) return null;
  const now = options.now ?? Date.now;
  const name = options.queryName;
  const locations = async (): Promise<NamespaceLocation[]> => {
    const pointer = await readNamespacePointer(clients.dynamodb, config.checkpointTable, name, options.meter);
    return [pointer.active, ...(pointer.shadow ? [pointer.shadow] : []), ...pointer.retired];
  };
  const prefixes = (await locations()).map((l) => sinkPrefixFor(name, undefined, l.sinkPrefix || config.sinkPrefix));
  const lease = options.dryRun
    ? null
    : await claimSpillGcLease(clients.dynamodb, config.checkpointTable, name, now(), options.leaseMs ?? DEFAULT_SPILL_GC_LEASE_MS, options.minIntervalMs ?? 0);
  if (!options.dryRun && !lease) return { skipped: 'not-due-or-running' };
  let report: SpillGcReport | undefined;
  try {
    report = await collectSpillGarbage({
      s3: clients.s3, bucket: config.sinkBucket!, prefixes, dynamodb: clients.dynamodb,
      // Read again after the listing: a replay started meanwhile is scanned too.
      tables: async () => (await locations()).map((l) => l.sinkTable ?? config.sinkTable!),
      ...(options.graceMs !== undefined ? { graceMs: options.graceMs } : {}),
      dryRun: options.dryRun === true, now, ...(options.meter ? { meter: options.meter } : {}),
      // With the invocation's deadline to go by, that rule (and its reserve) stops the run; the lease is only a backstop.
      ...(lease ? { shouldStop: () => now() >= lease.until - (options.remainingMs ? 0 : LEASE_MARGIN_MS) } : {}),
      ...(options.remainingMs ? { remainingMs: options.remainingMs } : {}),
      // A scan an earlier run stopped is continued, not started over.
      ...(lease?.progress ? { resume: lease.progress } : {}),
      ...(options.afterScan ? { afterScan: options.afterScan } : {}),
    });
    return report;
  } finally {
    if (lease) await releaseSpillGcLease(clients.dynamodb, config.checkpointTable, name, lease, now(), report?.progress);
  }
}
