/**
 * The resident set less its garbage, for the benchmarks' reports (run with --expose-gc): after a full
 * GC the heap's used part is the live set, and the rest of the heap V8 holds (heapTotal - heapUsed)
 * is space it reuses before asking for more. Without `gc`, the resident set as read.
 */
export function liveBytesAfterGc(): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (typeof gc !== 'function') return process.memoryUsage().rss;
  gc();
  const m = process.memoryUsage();
  return m.rss - (m.heapTotal - m.heapUsed);
}
