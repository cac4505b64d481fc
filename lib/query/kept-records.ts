/**
 * Keeping a planned batch's records while the stream may trim them (issue 11): a run that later
 * finds the shard trimmed reads the kept copy and runs the batch with exactly its planned records,
 * so its output is every earlier attempt's, a stale attempt's late write changes nothing, and no
 * record is lost. An attempt keeps before anything of its batch becomes visible in a sink:
 *
 *   - a re-run of a pending batch (an earlier attempt planned it and did not commit) keeps as soon
 *     as it holds all its records: Lambda retries a failed batch promptly, so the first retry that
 *     runs the engine keeps what a crashed attempt may have written from;
 *   - a first attempt keeps before its batch's first sink write when it is at risk: some record may
 *     leave the stream before the attempt's deadline (plus a margin). One not at risk ends before
 *     any of its records can expire, so it never writes after a run that lost them.
 *
 * What this leaves: a first attempt not at risk that wrote the sink and was killed (no catch
 * path), with no attempt running the engine before its records expired (the function broken for
 * longer than the retention). The run that then loses them cannot know what that attempt wrote;
 * the loss record says so.
 */
import type { StreamExecution } from '../runtime/stream-execution.js';
import { redriveRunOf, type ShardRecord } from '../sources/kinesis-shard-source.js';
import type { Offset } from '../sources/source.js';
import type { KeepPolicy, KeptBatch, KeptRecords } from './partition-backends.js';
import type { ShardSource } from './query-stage.js';

/** Kinesis's shortest retention: what an unknown stream's is taken to be (never overestimated). */
export const DEFAULT_RETENTION_MS = 24 * 3_600_000;
export const DEFAULT_KEEP_MARGIN_MS = 5 * 60_000;
/** Lambda's longest timeout: the deadline of an invocation that has none of its own. */
export const DEFAULT_KEEP_TIMEOUT_MS = 15 * 60_000;

const seqOf = (offset: Offset | null): bigint | null => {
  const seq = (offset as { sequenceNumber?: unknown } | null)?.sequenceNumber;
  return typeof seq === 'string' ? BigInt(seq) : null;
};

/** One invocation's keeping of its batches' records (the views are every shard view of the stage). */
export class BatchKeeper {
  private readonly pool = new Map<string, ShardRecord>();
  /** Batches whose copy is kept (by any attempt) or that run with a recorded loss: nothing more to keep. */
  private readonly settled = new Map<number, KeptBatch | null>();

  constructor(
    private readonly store: KeptRecords,
    private readonly execution: StreamExecution,
    private readonly views: readonly ShardSource[],
    private readonly shardId: string,
    private readonly policy: KeepPolicy | undefined,
    /** When this invocation must end (ms since the epoch, the records' clock). */
    private readonly deadlineMs: number,
  ) {}

  /** Records the invocation holds (delivered, or read back from the shard). */
  add(records: readonly ShardRecord[]): void {
    for (const r of records) this.pool.set(r.sequenceNumber, r);
  }

  /**
   * The pending batch's key and records: every held record within the planned range of any view
   * (a stage 2 with several hop inputs has one view per input over the same shard). Null for a
   * batch with no shard records (a no-data batch, a re-drive batch: its ledger keeps them).
   */
  private planned(): { batch: KeptBatch; records: ShardRecord[] } | null {
    const pending = this.execution.pendingBatch;
    if (!pending) return null;
    const ranges: { from: bigint; to: bigint }[] = [];
    let batch: KeptBatch | null = null;
    for (const view of this.views) {
      const start = this.execution.committedSourceOffsets.get(view.name) ?? null;
      const end = pending.offsets.get(view.name) ?? null;
      if (end === null || JSON.stringify(start) === JSON.stringify(end) || redriveRunOf(start, end)) continue;
      const to = seqOf(end);
      const first = (end as { firstSequenceNumber?: unknown }).firstSequenceNumber;
      if (to === null || typeof first !== 'string') continue;
      ranges.push({ from: seqOf(start) ?? -1n, to });
      batch ??= { shardId: this.shardId, batchId: pending.batchId, firstSequenceNumber: first, lastSequenceNumber: String(to) };
    }
    if (!batch) return null;
    const records = [...this.pool.values()]
      .filter((r) => { const seq = BigInt(r.sequenceNumber); return ranges.some((g) => seq > g.from && seq <= g.to); })
      .sort((a, b) => (BigInt(a.sequenceNumber) < BigInt(b.sequenceNumber) ? -1 : 1));
    return { batch, records };
  }

  /**
   * A re-run holding all its records keeps them (one look for a copy kept before). 'refused': a loss
   * is recorded for the batch, and this run must leave those records out as the committing run will.
   */
  async keepPending(): Promise<'kept' | 'refused' | 'nothing'> {
    const planned = this.planned();
    if (!planned) return 'nothing';
    const outcome = await this.store.keep(planned.batch, planned.records);
    this.settled.set(planned.batch.batchId, outcome === 'kept' ? planned.batch : null);
    return outcome;
  }

  /** The pending batch's kept copy, offered to every view: true when they now cover the batch. */
  async recover(): Promise<boolean> {
    const planned = this.planned();
    if (!planned) return false;
    const kept = await this.store.read(planned.batch);
    if (!kept) return false;
    this.add(kept);
    for (const view of this.views) view.offer(kept);
    this.settled.set(planned.batch.batchId, planned.batch);
    return true;
  }

  /** The pending batch runs with a recorded loss: nothing to keep for it. */
  settleWithLoss(batchId: number): void {
    this.settled.set(batchId, null);
  }

  /**
   * Before batch `batchId`'s first sink write: a first attempt at risk keeps its records. Refused
   * (a loss is recorded: another run lost them, and committed or will): this attempt must not write.
   */
  async beforeSinkWrite(batchId: number): Promise<void> {
    if (this.settled.has(batchId)) return;
    const planned = this.planned();
    if (!planned || planned.batch.batchId !== batchId || planned.records.length === 0 || !this.atRisk(planned.records)) {
      this.settled.set(batchId, null);
      return;
    }
    const outcome = await this.store.keep(planned.batch, planned.records);
    if (outcome === 'refused') {
      throw new Error(`batch ${batchId} of ${this.shardId}: a loss to retention is recorded for its planned records, `
        + 'so this attempt, which holds them all, writes nothing (its retry runs without them, as the committed run does)');
    }
    this.settled.set(batchId, planned.batch);
  }

  /** Whether a record may leave the stream before this attempt can no longer write. */
  private atRisk(records: readonly ShardRecord[]): boolean {
    const retentionMs = this.policy?.retentionMs ?? DEFAULT_RETENTION_MS;
    const marginMs = this.policy?.marginMs ?? DEFAULT_KEEP_MARGIN_MS;
    const oldest = Math.min(...records.map((r) => r.approximateArrivalTimestampMs));
    return oldest + retentionMs <= this.deadlineMs + marginMs;
  }

  /** Removes the copies of the kept batches that are committed now (best effort: the TTL is the backstop). */
  async removeCommitted(): Promise<void> {
    const committed = new Set(this.execution.recentProgress.map((p) => p.batchId));
    for (const [batchId, batch] of this.settled) {
      if (!batch || !committed.has(batchId)) continue;
      this.settled.set(batchId, null);
      await this.store.remove(batch).catch(() => undefined);
    }
  }
}

/**
 * Kept copies in memory (the engine's tests; no local backend records losses), with the same exclusion against
 * a recorded loss as the checkpoint table's: `recordLoss` fails while a copy is kept.
 */
export class InMemoryKeptRecords implements KeptRecords {
  private readonly kept = new Map<string, { batch: KeptBatch; records: ShardRecord[] }>();
  private readonly losses = new Set<string>();
  /** Copies written (not those found kept already): what keeping cost. */
  writes = 0;

  private key(b: Pick<KeptBatch, 'shardId' | 'firstSequenceNumber'>): string {
    return `${b.shardId}#${b.firstSequenceNumber}`;
  }

  async keep(batch: KeptBatch, records: readonly ShardRecord[]): Promise<'kept' | 'refused'> {
    const key = this.key(batch);
    if (this.losses.has(key)) return 'refused';
    const found = this.kept.get(key);
    if (found && !sameBatch(found.batch, batch)) throw new Error(`batch ${batch.batchId} of ${batch.shardId}: another plan's records are kept under its first record`);
    if (!found) {
      this.kept.set(key, { batch, records: [...records] });
      this.writes++;
    }
    return 'kept';
  }

  async read(batch: KeptBatch): Promise<ShardRecord[] | null> {
    const found = this.kept.get(this.key(batch));
    return found && sameBatch(found.batch, batch) ? [...found.records] : null;
  }

  async remove(batch: KeptBatch): Promise<void> {
    const found = this.kept.get(this.key(batch));
    if (found && sameBatch(found.batch, batch)) this.kept.delete(this.key(batch));
  }

  /** Records a loss for the batch starting at `firstSequenceNumber`; refused (throws) while its records are kept. */
  recordLoss(shardId: string, firstSequenceNumber: string): void {
    if (this.kept.has(this.key({ shardId, firstSequenceNumber }))) {
      throw new Error(`the planned records from ${firstSequenceNumber} of ${shardId} are kept: no loss is recorded`);
    }
    this.losses.add(this.key({ shardId, firstSequenceNumber }));
  }

  get size(): number {
    return this.kept.size;
  }
}

const sameBatch = (a: KeptBatch, b: KeptBatch): boolean => a.batchId === b.batchId && a.lastSequenceNumber === b.lastSequenceNumber;
