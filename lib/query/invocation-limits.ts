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
   * The function's memory and what the process uses of it: `usedBytes` the resident set (cheap, read
   * after every batch), `liveBytes` what stays of it once garbage is collected (costly, read only
   * when the resident set is over the high-water mark; absent: the resident set is judged).
   */
  readonly memory?: { readonly limitBytes: number; readonly usedBytes: () => number; readonly liveBytes?: () => number };
}

const MIB = 1024 * 1024;

/**
 * The limits of one invocation, read when it begins: the deadline from the Lambda context's
 * remaining time (when there is a context) and the function's configured memory against the
 * process's resident set.
 */
export function invocationLimitsOf(functionMemoryMb: number | undefined, remainingTimeMs: (() => number) | undefined): InvocationLimits {
  return {
    ...(remainingTimeMs ? { remainingTimeMs, budgetMs: remainingTimeMs() } : {}),
    ...(functionMemoryMb ? { memory: { limitBytes: functionMemoryMb * MIB, usedBytes: () => process.memoryUsage().rss, liveBytes: liveBytesAfterGc } } : {}),
  };
}

/**
 * The resident set a batch leaves, less its garbage. Read right after a batch, the resident set
 * counts what the batch allocated and no longer uses: the young generation alone may hold three
 * semi-spaces (192 MB at the construct's 64 MB), and old-space garbage waits for the next major GC,
 * so the same state reads differently from batch to batch. After a full GC (`gc`, which
 * the construct exposes with --expose-gc in NODE_OPTIONS), the heap's used part is the live set, and
 * the rest of the heap V8 holds (heapTotal - heapUsed) is space it reuses before asking for more: it
 * is subtracted, since a larger state would fill it first. Without `gc`, the resident set as read.
 */
export function liveBytesAfterGc(): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (typeof gc !== 'function') return process.memoryUsage().rss;
  gc();
  const m = process.memoryUsage();
  return m.rss - (m.heapTotal - m.heapUsed);
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

/**
 * Throws STATE_EXCEEDS_MEMORY when the process uses more than MEMORY_HIGH_WATER of the function's
 * memory after a batch, garbage left out (`liveBytes`, read only when the resident set is over): a
 * state that keeps growing would end in an out-of-memory crash or a load that outlasts the timeout,
 * retried forever. Failing here says what to change.
 */
export function checkMemoryHeadroom(limits: InvocationLimits, shardId: string, progress: StreamingQueryProgress | undefined): void {
  const memory = limits.memory;
  if (!memory) return;
  const highWater = memory.limitBytes * MEMORY_HIGH_WATER;
  if (memory.usedBytes() <= highWater) return;
  const used = memory.liveBytes ? memory.liveBytes() : memory.usedBytes();
  if (used <= highWater) return;
  const stateRows = progress?.stateOperators.reduce((n, op) => n + op.numRowsTotal, 0) ?? 0;
  const usedMb = Math.round(used / MB);
  const limitMb = Math.round(memory.limitBytes / MB);
  throw new StreamingQueryError(
    `Shard ${shardId}: after batch ${progress?.batchId ?? '?'} the function uses ${usedMb} MB of its ${limitMb} MB `
      + `with ${stateRows} state rows on this shard; a larger state would crash out of memory or time out loading.`,
    {
      code: 'STATE_EXCEEDS_MEMORY', retryable: false, context: { shardId, usedMb, limitMb, stateRows },
      hint: 'raise the function\'s memory (SluiceQuery memorySize, up to 10240 MB), spread the keys over more shards '
        + '(shardCount), or, with a repartition stage, over more internal shards (repartitionShardCount); a shorter watermark '
        + 'delay or window also keeps less state. The batches before this one are committed.',
    },
  );
}
