/**
 * Where a 'zombie-wakes-late' fault of an upsert sink freezes: at a batch some newer batch will
 * overwrite, so that its late write must be refused by the sink's fence (a stale value over a
 * newer one). A zombie of a batch whose keys no later batch writes lands where nothing newer is,
 * and a sink without a fence passes unseen ("unchallenged").
 *
 * Which batches those are cannot be known from the batch alone; the fault-free run tells: a key
 * is written again later unless the batch's row for it is already the key's final row. A fault
 * that strikes a batch whose every row is final moves to the next sink attempt (as a zombie in a
 * container no timeout governs does), until the run is past most of the attempts the fault-free
 * run made, where it stays (a planned fault that never happens fails the run). A batch of keys
 * the sink never held (stage 1 writing an internal stream) gives nothing to go by: it freezes there.
 */
import { toExternalRow } from '../../sinks/external-row.js';
import type { SinkBatch } from '../../sinks/sink.js';
import { parseJsonWithLongs } from '../../core/long.js';
import { canonicalJson } from './compare.js';
import type { SinkHistory } from './history.js';

/** Past this share of the fault-free run's sink attempts, a zombie freezes wherever it strikes. */
const LAST_SHARE = 0.85;

/** Whether a zombie striking `batch` (at the `met`-th sink attempt of its function) should freeze there. */
export type ZombieChoice = (batch: SinkBatch, met: number) => boolean;

/**
 * From the fault-free run's history of an upsert sink (`faultFree`) and how many sink attempts
 * the function made there. Undefined for an S3 sink (no key is overwritten; any batch will do).
 */
export function zombieChoiceFrom(faultFree: SinkHistory, faultFreeAttempts: number): ZombieChoice | undefined {
  if (faultFree.sinkPrefix) return undefined;
  const final = new Map<string, string>();
  for (const w of [...faultFree.items].sort((a, b) => a.seq - b.seq)) final.set(w.key, w.row);
  return (batch, met) => {
    if (met >= faultFreeAttempts * LAST_SHARE) return true;
    // Rows of keys the sink never held (a stage writing an internal stream): nothing to go by, freeze here.
    let known = false;
    for (const r of batch.rows) {
      const row = canonicalJson(toExternalRow(r, batch.schema));
      const last = final.get(faultFree.keyOf(parseJsonWithLongs(row) as Record<string, unknown>));
      if (last !== undefined && last !== row) return true;
      known ||= last !== undefined;
    }
    return !known;
  };
}
