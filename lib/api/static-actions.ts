/** Actions of a static DataFrame beyond collect(): Spark's show, limit and the errors streams get. */
import { AnalysisError, IllegalArgumentError } from '../errors/sluice-error.js';
import { isStreaming, type LogicalPlan } from '../plan/logical-plan.js';
import { runBatchQuery } from '../runtime/batch-runner.js';
import { formatBatchTable } from '../sinks/console-sink.js';

/** Spark's `df.show()` text: the console sink's table without its batch header. */
export function showString(plan: LogicalPlan, numRows: number, truncate: boolean | number): string {
  if (!Number.isSafeInteger(numRows) || numRows < 0) {
    throw new IllegalArgumentError(`numRows must be a non-negative integer, got ${numRows}.`, { code: 'INVALID_SHOW_ROWS' });
  }
  const rows = runBatchQuery(plan);
  const table = formatBatchTable(
    { batchId: 0, columns: plan.output.map((a) => a.name), rows, outputMode: 'append', schema: plan.output.map((a) => ({ name: a.name, type: a.type })), partitionId: 'static' },
    [],
    { numRows, truncate: truncate === true ? 20 : truncate === false ? 0 : truncate },
  );
  // The console sink's first three lines are its `Batch: N` header.
  return table.split('\n').slice(3).join('\n');
}

/** The first `n` rows of a static plan, as a plan over those rows (a LocalRelation keeping the attributes). */
export function limitPlan(plan: LogicalPlan, n: number): LogicalPlan {
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new AnalysisError(`[INVALID_LIMIT_LIKE_EXPRESSION.IS_NEGATIVE] The limit like expression "${n}" is invalid. The limit expression must be equal to or greater than 0.`, {
      code: 'INVALID_LIMIT', errorClass: 'INVALID_LIMIT_LIKE_EXPRESSION.IS_NEGATIVE',
    });
  }
  if (isStreaming(plan)) {
    throw new AnalysisError('limit() on a streaming DataFrame is not supported by Sluice.', {
      code: 'STREAMING_LIMIT', hint: 'limit each micro-batch inside foreachBatch((batch, batchId) => batch.limit(n)...), or keep a top-N per window with an aggregation.',
    });
  }
  // Static data is bounded: running the plan so far is what a Limit over it would read.
  return { kind: 'LocalRelation', name: 'Limit', rows: runBatchQuery(plan).slice(0, n), output: plan.output };
}

/** Spark's CALL_ON_STREAMING_DATASET_UNSUPPORTED, e.g. for `write` on a stream. */
export function callOnStreamingUnsupported(methodName: string, hint: string): AnalysisError {
  return new AnalysisError(`[CALL_ON_STREAMING_DATASET_UNSUPPORTED] The method \`${methodName}\` can not be called on streaming Dataset/DataFrame. SQLSTATE: 42KDE`, {
    code: 'CALL_ON_STREAMING_DATASET_UNSUPPORTED', errorClass: 'CALL_ON_STREAMING_DATASET_UNSUPPORTED', hint,
  });
}

/** Spark's WRITE_STREAM_NOT_ALLOWED: `writeStream` on a static DataFrame. */
export function writeStreamNotAllowed(): AnalysisError {
  // Spark 4's Dataset API text, then the analyzer's sentence (UnsupportedOperationChecker) for the same plan.
  return new AnalysisError('[WRITE_STREAM_NOT_ALLOWED] `writeStream` can be called only on streaming Dataset/DataFrame. SQLSTATE: 42601. '
    + 'Queries without streaming sources cannot be executed with writeStream.start().', {
    code: 'WRITE_STREAM_NOT_ALLOWED', errorClass: 'WRITE_STREAM_NOT_ALLOWED', hint: 'a static DataFrame is written with df.write.sink(sink).save(), or read with collect()/show().',
  });
}

/**
 * A static aggregation by session_window would need Spark's session merge (MergingSessionsExec),
 * which only the streaming operator has: refused rather than giving one session per row.
 */
export function staticSessionWindowUnsupported(): AnalysisError {
  return new AnalysisError('session_window() in an aggregation of a static DataFrame is not supported by Sluice yet.', {
    code: 'STATIC_SESSION_WINDOW', hint: 'aggregate by session_window on the stream itself (before foreachBatch), or group a static DataFrame by window() or keys.',
  });
}
