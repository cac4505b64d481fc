/**
 * `sluice dev --rate N/s`: records put at a steady rate (in chunks every 100 ms or slower), so
 * the event source mapping's batches form as they would from a live producer instead of from one
 * burst. The chunks keep the file's order.
 */
export async function putAtRate<T>(put: (chunk: readonly T[]) => Promise<unknown>, records: readonly T[], perSecond: number, sleep = defaultSleep): Promise<void> {
  const chunkSize = Math.max(1, Math.floor(perSecond / 10));
  const intervalMs = (chunkSize * 1000) / perSecond;
  const startedAt = Date.now();
  for (let i = 0, n = 0; i < records.length; i += chunkSize, n++) {
    const wait = startedAt + n * intervalMs - Date.now();
    if (wait > 0) await sleep(wait);
    await put(records.slice(i, i + chunkSize));
  }
}

function defaultSleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** `--rate` as the CLI takes it: `200/s`, `200`, or `12/min`. */
export function parseRate(text: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(?:\/\s*(s|sec|second|min|minute))?\s*$/i.exec(text);
  const n = match ? Number(match[1]) : Number.NaN;
  if (!match || !(n > 0)) throw new Error(`--rate must look like 200/s (records per second) or 12/min, got '${text}'`);
  return /^min/i.test(match[2] ?? '') ? n / 60 : n;
}
