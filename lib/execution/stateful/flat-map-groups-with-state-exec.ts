import { parseDataType, typeToString, type DataType } from '../../plan/data-types.js';
import type { StatefulProcessingNode } from '../../plan/logical-plan.js';
import type { StateStore } from '../../state/state-store.js';
import type { Row } from '../evaluate.js';
import type { BatchContext, Exec } from '../physical.js';
import { KeyedStatefulExec } from './keyed-stateful-exec.js';
import { GroupTimeoutIndex, indexOf } from './state-index.js';
import { compareValues, encodeKey } from '../values.js';
import { dropLateRows, groupInput } from './grouped-input.js';
import { GroupStateImpl } from './group-state.js';
import { stateKeys, type StoredGroup } from './keyed-state.js';
import { outputRow } from './state-values.js';

interface CallOutcome {
  readonly updated: number;
  readonly removed: number;
}

/**
 * Spark's FlatMapGroupsWithStateExec (mapGroupsWithState is the same with one row per call). Per
 * batch: each key's new rows (keys ascending), then every state whose timeout is strictly before
 * the batch timestamp (processing time) or the watermark for eviction (event time), called with no
 * rows and hasTimedOut() true. State: `g|<key>` -> [keyValues, state | null, timeoutMs | null].
 */
export class FlatMapGroupsWithStateExec extends KeyedStatefulExec {
  readonly nodeName = 'FlatMapGroupsWithState';
  readonly stateSchema: string;
  private readonly stateType: DataType | null;

  constructor(operatorId: number, child: Exec, node: StatefulProcessingNode) {
    super(operatorId, child, node, 'flatMapGroupsWithState');
    this.stateType = node.stateType === null ? null : parseDataType(node.stateType);
    this.stateSchema = `${node.api}(timeout=${node.timeMode}, keys=[${node.keys.map((k) => `${k.name}:${typeToString(k.type)}`).join(', ')}], `
      + `state=${this.stateType === null ? 'any' : typeToString(this.stateType)})`;
  }

  execute(ctx: BatchContext): Row[] {
    const { node } = this;
    const progress = this.newProgress();
    const eventTimeTimeout = node.timeMode === 'eventTime';
    // Spark drops late rows only when the timeout is in event time.
    const lateMs = ctx.hasWatermark && eventTimeTimeout ? ctx.lateEventsWatermarkMs(this.operatorId) : null;
    const { rows: input, dropped } = dropLateRows(this.child.execute(ctx), this.child.output, lateMs);
    progress.numRowsDroppedByWatermark = dropped;

    const store = ctx.store<StoredGroup>(this.stateStoreIds[0]!);
    const timeouts = indexOf(store, 'flatMapGroupsWithState', GroupTimeoutIndex.build);
    /** Groups this batch wrote: their timeouts are not in the committed index yet. */
    const written = new Set<string>();
    const batchTimestampMs = ctx.eval.batchTimestampMs;
    const watermarkMs = ctx.hasWatermark ? ctx.evictionWatermarkMs(this.operatorId) : null;
    const output: Row[] = [];
    const counts = { updated: 0, removed: 0 };
    const call = (key: string, keyValues: readonly unknown[], rows: readonly Record<string, unknown>[], timedOut: boolean): void => {
      const storeKey = stateKeys.group(key);
      const stored = store.get(storeKey);
      const state = new GroupStateImpl<unknown>(stored?.[1] ?? undefined, node.timeMode, batchTimestampMs, watermarkMs, timedOut, this.stateType);
      for (const r of node.fn!(keyValues, rows, state)) output.push(outputRow(r, node.output, node.api));
      const outcome = this.saveState(store, storeKey, keyValues, stored, state);
      if (outcome.updated + outcome.removed > 0) written.add(storeKey);
      counts.updated += outcome.updated;
      counts.removed += outcome.removed;
    };

    for (const group of groupInput(input, this.child.output, node.keys)) call(group.key, group.keyValues, group.rows, false);

    const thresholdMs = node.timeMode === 'processingTime' ? batchTimestampMs : eventTimeTimeout && watermarkMs !== null ? watermarkMs : null;
    const timeoutNow = (storeKey: string): number | null => store.get(storeKey)?.[2] ?? null;
    if (thresholdMs !== null) {
      // Strictly before the threshold: the index gives those at or before it, the check below the rest.
      const candidates = timeouts.heap.due(thresholdMs, (k, t) => timeoutNow(k) === t);
      for (const k of written) candidates.add(k);
      const timedOut: StoredGroup[] = [];
      for (const storeKey of candidates) {
        const value = store.get(storeKey);
        if (value !== undefined && value[2] !== null && value[2] < thresholdMs) timedOut.push(value);
      }
      timedOut.sort((a, b) => compareKeys(a[0], b[0]));
      for (const [keyValues] of timedOut) call(encodeKey(keyValues), keyValues, [], true);
    }

    if (node.timeMode === 'processingTime') {
      let earliest = timeouts.heap.earliest((k, t) => !written.has(k) && timeoutNow(k) === t);
      for (const k of written) {
        const t = timeoutNow(k);
        if (t !== null && (earliest === null || t < earliest)) earliest = t;
      }
      this.nextTimer = earliest;
    } else this.nextTimer = null;
    // GroupState has no TTL.
    this.nextExpiry = null;
    this.recordEvictionWatermark(ctx);
    progress.numRowsTotal = store.size;
    progress.numRowsUpdated = counts.updated;
    progress.numRowsRemoved = counts.removed;
    progress.numOutputRows = output.length;
    this.progress = progress;
    return output;
  }

  /** Spark's callFunctionAndUpdateState: what the call left is written only if something changed. */
  private saveState(store: StateStore<StoredGroup>, storeKey: string, keyValues: readonly unknown[], stored: StoredGroup | undefined, state: GroupStateImpl<unknown>): CallOutcome {
    if (state.removed && state.timeoutMs === null) {
      if (stored === undefined) return { updated: 0, removed: 0 };
      store.remove(storeKey);
      return { updated: 0, removed: 1 };
    }
    const timeoutChanged = state.timeoutMs !== (stored?.[2] ?? null);
    if (!(state.updated || state.removed || timeoutChanged)) return { updated: 0, removed: 0 };
    store.put(storeKey, [keyValues, state.exists() ? state.getOption() : null, state.timeoutMs]);
    return { updated: 1, removed: 0 };
  }

  produceOutputWatermark(inputWatermarkMs: number): number | null {
    return inputWatermarkMs;
  }
}

function compareKeys(a: readonly unknown[], b: readonly unknown[]): number {
  for (let i = 0; i < a.length; i++) {
    const c = compareValues(a[i], b[i]);
    if (c !== 0) return c;
  }
  return 0;
}
