/**
 * Late rows of wave 2 a run may count. The oracle's reference drops every late row: its one
 * partition's watermark is past them when wave 2 arrives. The engine runs each shard's batch with
 * the minimum watermark over the shards still live (lib/runtime/watermark-coordinator.ts), and a
 * shard whose batches were given up (an outage; the skipped ranges wait for a re-drive) is not
 * caught up, so it holds the watermark back, to none when it never committed a row. A late row
 * then lands in a window still open and is counted. Spark allows it (it guarantees to keep rows
 * within the delay; a row behind the watermark may or may not be dropped), so after an outage the
 * oracle accepts the answer with any of the late rows counted. The fault-free run still checks
 * that every late row is dropped.
 */
import type { PlacedRecord } from './memory-reference.js';

/** Every subset of `items`, by size (the empty one first); only none and all beyond `max` items. */
export function subsetsBySize<T>(items: readonly T[], max = 4): T[][] {
  if (items.length > max) return [[], [...items]];
  const all: T[][] = [[]];
  for (const item of items) for (const s of [...all]) all.push([...s, item]);
  return all.sort((a, b) => a.length - b.length);
}

/**
 * The reference's input with the late rows `counted` moved from wave 2 to the front of wave 1: the
 * reference's first batch runs with no watermark, so it counts them. Wave 1's rows are never behind
 * its own watermark (their disorder is below the delay), so the move changes nothing else.
 */
export function countingLateRows(wave1: readonly PlacedRecord[], wave2: readonly PlacedRecord[], counted: (r: PlacedRecord) => boolean)
  : { records: PlacedRecord[]; waveStart: number } {
  const moved = wave2.filter(counted);
  return { records: [...moved, ...wave1, ...wave2.filter((r) => !counted(r))], waveStart: moved.length + wave1.length };
}
