/**
 * The two limits of one function invocation: its deadline and its memory. Both are checked
 * between batches, where stopping costs nothing: the batches before are committed, and the
 * answer (batchItemFailures) says where the next invocation starts.
 */
import { StreamingQueryError } from '../errors/sluice-error.js';
import type { StreamingQueryProgress } from '../runtime/progress.js';

export interface InvocationLimits {
  /** Time left before the deadline (Lambda's `context.getRemainingTimeInMillis`). */
  readonly remainingTimeMs?: () => number;
  /** The invocation's whole time: the remaining time when it began (about the function's timeout). */
  readonly budgetMs?: number;
  /**
   * The function's memory and what the process has used of it: the peak resident set so far (what
   * Lambda's limit counts; it never goes down, so the reading does not depend on when the GC ran).
   */
  readonly memory?: { readonly limitBytes: number; readonly usedBytes: () => number; readonly history?: MemoryHistory };
}

/**
 * What the batches of this process needed, per shard, to judge the next one before it starts: the
 * peak resident set, the state rows when it last rose, and the most rows one batch added. Module
 * scope in the handlers (`processMemoryHistory`): a warm container's invocations share it, and a
 * cold one starts without (its first batch is judged after it ran).
 */
export class MemoryHistory {
  private readonly shards = new Map<string, { rows: number; rowsAtPeak: number; peakBytes: number; largestGrowth: number }>();

  /** `baselineBytes`: the resident set before any state was loaded (the runtime and the code). */
  constructor(readonly baselineBytes: number) {}

  /** After a batch of `shardId`: its state rows then, and the process's peak so far. */
  record(shardId: string, stateRows: number, peakBytes: number): void {
    const s = this.shards.get(shardId);
    if (s === undefined) {
      this.shards.set(shardId, { rows: stateRows, rowsAtPeak: stateRows, peakBytes, largestGrowth: 0 });
      return;
    }
    s.largestGrowth = Math.max(s.largestGrowth, stateRows - s.rows);
    s.rows = stateRows;
    if (peakBytes > s.peakBytes) {
      s.peakBytes = peakBytes;
      s.rowsAtPeak = stateRows;
    }
  }

  /**
   * The peak the next batch of `shardId` may reach (null: no batch of it ran in this process): the
   * peak so far plus, for the rows one batch may add (the most one added so far), what each state
   * row cost at that peak above the baseline. Rows cost no more than their share of the peak, so a
   * state growing toward the limit is refused a batch before it gets there; while the state is
   * smaller than one batch's growth, at most the state's share is added again.
   */
  nextPeakBytes(shardId: string): { bytes: number; rows: number; growth: number; peakBytes: number } | null {
    const s = this.shards.get(shardId);
    if (s === undefined || s.rows === 0) return null;
    const growth = s.largestGrowth;
    const stateBytes = Math.max(0, s.peakBytes - this.baselineBytes);
    const bytes = s.peakBytes + (growth === 0 ? 0 : stateBytes * (growth / Math.max(s.rowsAtPeak, growth)));
    return { bytes, rows: s.rows, growth, peakBytes: s.peakBytes };
  }
}

/** The process's history (the handlers' limits): the baseline is the resident set when this module loaded, before any state. */
export const processMemoryHistory = new MemoryHistory(process.memoryUsage().rss);

const MIB = 1024 * 1024;

/**
 * The limits of one invocation, read when it begins: the deadline from the Lambda context's
 * remaining time (when there is a context) and the function's configured memory against the
 * process's resident set.
 */
export function invocationLimitsOf(functionMemoryMb: number | undefined, remainingTimeMs: (() => number) | undefined): InvocationLimits {
  return {
    ...(remainingTimeMs ? { remainingTimeMs, budgetMs: remainingTimeMs() } : {}),
    ...(functionMemoryMb ? { memory: { limitBytes: functionMemoryMb * MIB, usedBytes: peakResidentBytes, history: processMemoryHistory } } : {}),
  };
}

/**
 * The process's peak resident set. The resident set read at one moment after a batch is noisy: it
 * counts the garbage the batch left (the young generation alone may hold 192 MB at the construct's
 * 64 MB semi-space) until a GC runs. The live set after a forced GC is stable but blind to what a
 * batch needs while it runs, which at 1,000,000 keys is as much again (peak 1,701 MB, live set 738 MB,
 * bench/limits.ts): judged on it, a state would grow until Lambda killed an invocation mid-batch. The
 * peak is what Lambda's limit counts, and it only grows, so a container once near its memory keeps
 * saying so.
 */
export function peakResidentBytes(): number {
  return process.resourceUsage().maxRSS * 1024;
}

/** Kept for answering Lambda and publishing metrics after the last batch. */
export const DEADLINE_RESERVE_MS = 2_000;
/** Above this share of the function's memory, a batch more may not fit. */
export const MEMORY_HIGH_WATER = 0.85;

/**
 * Whether another batch may start: only when it can finish before the deadline, taking the
 * longest batch of this invocation twice (the next may load more state or records) plus the
 * reserve. Before any batch ran, only the reserve is required.
 */
export function hasTimeForBatch(limits: InvocationLimits, longestBatchMs: number): boolean {
  if (!limits.remainingTimeMs) return true;
  return limits.remainingTimeMs() >= DEADLINE_RESERVE_MS + 2 * longestBatchMs;
}

const MB = 1024 * 1024;

/**
 * Above this share of the invocation's time, one batch of a stateful stage is a warning that the
 * state is near what a cold start can load: the next cold start, with a little more state, may
 * not finish its first batch before the timeout, and Lambda would retry it, timing out every time,
 * until the records expire.
 */
export const BATCH_TIME_HIGH_WATER = 0.5;

/**
 * Throws STATE_LOAD_NEAR_TIMEOUT when one batch of a stage holding state took more than
 * BATCH_TIME_HIGH_WATER of the invocation's time (`budgetMs`). The batch is committed; failing
 * here, loudly, is what replaces a silent loop of timeouts once the state grows a little more.
 */
export function checkBatchTimeHeadroom(
  limits: InvocationLimits, batchMs: number, shardId: string, progress: StreamingQueryProgress | undefined,
): void {
  const budgetMs = limits.budgetMs;
  if (budgetMs === undefined || batchMs <= budgetMs * BATCH_TIME_HIGH_WATER) return;
  const stateRows = progress?.stateOperators.reduce((n, op) => n + op.numRowsTotal, 0) ?? 0;
  if (stateRows === 0) return;
  const batchSeconds = Math.round(batchMs / 100) / 10;
  const budgetSeconds = Math.round(budgetMs / 100) / 10;
  throw new StreamingQueryError(
    `Shard ${shardId}: batch ${progress?.batchId ?? '?'} took ${batchSeconds} s of the invocation's ${budgetSeconds} s with ${stateRows} state rows `
      + 'on this shard; a cold start loading a larger state would time out, and be retried until its records expire.',
    {
      code: 'STATE_LOAD_NEAR_TIMEOUT', retryable: false, context: { shardId, batchSeconds, budgetSeconds, stateRows },
      hint: 'raise the function\'s timeout (SluiceQuery timeout, up to 15 minutes) or memory (memorySize: Lambda gives CPU in proportion), '
        + 'spread the keys over more shards (shardCount), or, with a repartition stage, over more internal shards (repartitionShardCount); '
        + 'a shorter watermark delay or window also keeps less state. The batches before this one are committed.',
    },
  );
}

const MEMORY_HINT = 'raise the function\'s memory (SluiceQuery memorySize, up to 10240 MB), spread the keys over more shards '
  + '(shardCount), or, with a repartition stage, over more internal shards (repartitionShardCount); a shorter watermark '
  + 'delay or window also keeps less state.';

/**
 * Before a batch: throws STATE_EXCEEDS_MEMORY when the peak the batch may reach (`MemoryHistory`)
 * passes MEMORY_HIGH_WATER of the function's memory. Judged only after it ran, such a batch could
 * pass the limit itself, and Lambda would kill the invocation mid-batch (then retry it, killed
 * again) instead of failing with what to change. Nothing of the batch has run: its records stay.
 */
export function checkMemoryForNextBatch(limits: InvocationLimits, shardId: string, nextBatchId: number): void {
  const memory = limits.memory;
  const next = memory?.history?.nextPeakBytes(shardId);
  if (!memory || !next || next.bytes <= memory.limitBytes * MEMORY_HIGH_WATER) return;
  const needMb = Math.round(next.bytes / MB);
  const peakMb = Math.round(next.peakBytes / MB);
  const limitMb = Math.round(memory.limitBytes / MB);
  throw new StreamingQueryError(
    `Shard ${shardId}: batch ${nextBatchId} was not started: it may need ${needMb} MB of the function's ${limitMb} MB at its peak `
      + `(${peakMb} MB so far with ${next.rows} state rows on this shard, and a batch has added up to ${next.growth} rows), `
      + `more than the ${Math.round(MEMORY_HIGH_WATER * 100)}% it may use; run, it could crash out of memory mid-batch.`,
    {
      code: 'STATE_EXCEEDS_MEMORY', retryable: false, context: { shardId, needMb, peakMb, limitMb, stateRows: next.rows, growthRows: next.growth },
      hint: `${MEMORY_HINT} The batches before this one are committed; this one's records are retried.`,
    },
  );
}

/**
 * Throws STATE_EXCEEDS_MEMORY when the process uses more than MEMORY_HIGH_WATER of the function's
 * memory at its peak so far, read after a batch: a state that keeps growing would end in an
 * out-of-memory crash mid-batch or a load that outlasts the timeout, retried forever. Failing here
 * says what to change.
 */
export function checkMemoryHeadroom(limits: InvocationLimits, shardId: string, progress: StreamingQueryProgress | undefined): void {
  const memory = limits.memory;
  if (!memory) return;
  const used = memory.usedBytes();
  const stateRows = progress?.stateOperators.reduce((n, op) => n + op.numRowsTotal, 0) ?? 0;
  if (progress) memory.history?.record(shardId, stateRows, used);
  if (used <= memory.limitBytes * MEMORY_HIGH_WATER) return;
  const usedMb = Math.round(used / MB);
  const limitMb = Math.round(memory.limitBytes / MB);
  throw new StreamingQueryError(
    `Shard ${shardId}: after batch ${progress?.batchId ?? '?'} the function uses ${usedMb} MB of its ${limitMb} MB at its peak `
      + `with ${stateRows} state rows on this shard; a larger state would crash out of memory or time out loading.`,
    {
      code: 'STATE_EXCEEDS_MEMORY', retryable: false, context: { shardId, usedMb, limitMb, stateRows },
      hint: `${MEMORY_HINT} The batches before this one are committed.`,
    },
  );
}
