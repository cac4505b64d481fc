import { typeToString } from '../../plan/data-types.js';
import type { StatefulProcessingNode } from '../../plan/logical-plan.js';
import type { ExpiredTimerInfo, Row as UserRow, StatefulProcessor, TimerValues } from '../../plan/stateful-processor.js';
import { IllegalArgumentError } from '../../errors/sluice-error.js';
import { encodeKey } from '../values.js';
import type { Row } from '../evaluate.js';
import type { BatchContext, Exec } from '../physical.js';
import { KeyedStatefulExec } from './keyed-stateful-exec.js';
import { KeyedState } from './keyed-state.js';
import { dropLateRows, groupInput } from './grouped-input.js';
import { describeVariable, ProcessorHandle } from './processor-handle.js';
import { outputRow } from './state-values.js';

/**
 * Spark's TransformWithStateExec. Per batch: init the processor; in the first batch, hand it the
 * initial state; then each key's new rows (keys ascending); then the expired timers (time, then
 * key): processing-time timers at or before the batch timestamp, event-time timers at or before the
 * watermark for eviction (Spark 4.0.1 fires a timer at exactly the threshold; flatMapGroupsWithState's
 * timeouts stay strictly before it), each deleted after its handler ran; then TTL cleanup and close. A timer
 * registered while handling input that is already expired fires in the same batch, as in Spark.
 */
export class TransformWithStateExec extends KeyedStatefulExec {
  readonly nodeName = 'TransformWithState';
  readonly stateSchema: string;

  constructor(operatorId: number, child: Exec, node: StatefulProcessingNode) {
    super(operatorId, child, node, 'transformWithStateExec');
    // Spark runs init on the driver to learn the state variables; their layout is the state schema.
    const handle = new ProcessorHandle(node.timeMode, -1, null);
    const processor = this.newProcessor();
    processor.init(handle, node.timeMode, node.operatorOutputMode);
    processor.close?.();
    this.stateSchema = `transformWithState(timeMode=${node.timeMode}, keys=[${node.keys.map((k) => `${k.name}:${typeToString(k.type)}`).join(', ')}], `
      + `vars=[${handle.variables.map(describeVariable).join(', ')}])`;
  }

  private newProcessor(): StatefulProcessor {
    return this.node.processor!();
  }

  execute(ctx: BatchContext): Row[] {
    const { node } = this;
    const id = this.stateStoreIds[0]!;
    const progress = this.newProgress();
    const lateMs = ctx.hasWatermark ? ctx.lateEventsWatermarkMs(this.operatorId) : null;
    const { rows: input, dropped } = dropLateRows(this.child.execute(ctx), this.child.output, lateMs);
    progress.numRowsDroppedByWatermark = dropped;

    const batchTimestampMs = ctx.eval.batchTimestampMs;
    const watermarkMs = ctx.hasWatermark ? ctx.evictionWatermarkMs(this.operatorId) : 0;
    const state = new KeyedState(ctx.store<unknown>(id), batchTimestampMs);
    const handle = new ProcessorHandle(node.timeMode, ctx.batchId, state);
    const processor = this.newProcessor();
    processor.init(handle, node.timeMode, node.operatorOutputMode);
    handle.phase = 'INITIALIZED';
    const timerValues: TimerValues = {
      getCurrentProcessingTimeInMs: () => batchTimestampMs,
      getCurrentWatermarkInMs: () => watermarkMs,
    };
    const output: Row[] = [];
    const emit = (rows: Iterable<UserRow> | undefined): void => {
      for (const r of rows ?? []) output.push(outputRow(r, node.output, 'transformWithState'));
    };

    if (ctx.batchId === 0 && node.initialState) this.applyInitialState(processor, handle, timerValues, ctx.ownsStateKey);
    for (const group of groupInput(input, this.child.output, node.keys)) {
      handle.setKey(group.key, group.keyValues);
      emit(processor.handleInputRows(group.keyValues, group.rows, timerValues));
    }
    handle.phase = 'DATA_PROCESSED';

    const thresholdMs = node.timeMode === 'processingTime' ? batchTimestampMs : node.timeMode === 'eventTime' && ctx.hasWatermark ? watermarkMs : null;
    let numExpiredTimers = 0;
    if (thresholdMs !== null) {
      for (const timer of state.expiredTimers(thresholdMs)) {
        handle.setKey(timer.key, timer.keyValues);
        const info: ExpiredTimerInfo = { getExpiryTimeInMs: () => timer.expiryMs };
        emit(processor.handleExpiredTimer?.(timer.keyValues, timerValues, info));
        state.deleteTimer(timer.key, timer.expiryMs);
        numExpiredTimers++;
      }
    }
    handle.phase = 'TIMER_PROCESSED';
    handle.clearKey();
    const ttlRemoved = state.removeExpired();
    processor.close?.();
    handle.phase = 'CLOSED';

    // nextTimerMs() is the time a batch must be past; a timer fires in a batch at its own time.
    const earliest = node.timeMode === 'processingTime' ? state.earliestTimerMs() : null;
    this.nextTimer = earliest === null ? null : earliest - 1;
    // A value expires in a batch whose timestamp is at or past its expiry.
    const expiry = state.earliestExpiryMs();
    this.nextExpiry = expiry === null ? null : expiry - 1;
    this.recordEvictionWatermark(ctx);
    // Spark's RocksDB store leaves its internal column families (timers) out of numRowsTotal.
    progress.numRowsTotal = state.store.size - state.timerCount();
    progress.numRowsUpdated = state.counters.updated;
    progress.numRowsRemoved = state.counters.removed;
    progress.numOutputRows = output.length;
    const count = (kind: string): number => handle.variables.filter((v) => v.kind === kind).length;
    const withTtl = (kind: string): number => handle.variables.filter((v) => v.kind === kind && v.ttlMs !== null).length;
    progress.customMetrics = {
      numValueStateVars: count('value'), numListStateVars: count('list'), numMapStateVars: count('map'),
      numValueStateWithTTLVars: withTtl('value'), numListStateWithTTLVars: withTtl('list'), numMapStateWithTTLVars: withTtl('map'),
      numRegisteredTimers: handle.metrics.numRegisteredTimers, numDeletedTimers: handle.metrics.numDeletedTimers,
      numExpiredTimers, numValuesRemovedDueToTTLExpiry: ttlRemoved,
    };
    this.progress = progress;
    return output;
  }

  /** On one of several partitions, only the keys it owns: each key's initial state is applied once, where its rows go. */
  private applyInitialState(processor: StatefulProcessor, handle: ProcessorHandle, timerValues: TimerValues, owns: BatchContext['ownsStateKey']): void {
    if (!processor.handleInitialState) {
      throw new IllegalArgumentError('transformWithState was given an initial state, but its processor has no handleInitialState method.', {
        code: 'NO_INITIAL_STATE_HANDLER', hint: 'implement handleInitialState(key, row, timerValues), or drop the initialState option.',
      });
    }
    const seen = new Set<string>();
    for (const { key: keyValues, row } of this.node.initialState!) {
      const key = encodeKey(keyValues);
      if (seen.has(key)) {
        throw new IllegalArgumentError(
          `[STATEFUL_PROCESSOR_CANNOT_REINITIALIZE_STATE_ON_KEY] Cannot re-initialize state on the same grouping key during initial state handling for stateful processor. Invalid grouping key=${JSON.stringify(keyValues)}.`,
          { code: 'STATEFUL_PROCESSOR_CANNOT_REINITIALIZE_STATE_ON_KEY', errorClass: 'STATEFUL_PROCESSOR_CANNOT_REINITIALIZE_STATE_ON_KEY', hint: 'give the initial state one row per key.' },
        );
      }
      seen.add(key);
      if (owns && !owns(this.operatorId, keyValues)) continue;
      handle.setKey(key, keyValues);
      processor.handleInitialState(keyValues, row, timerValues);
    }
  }

  produceOutputWatermark(inputWatermarkMs: number): number | null {
    // Spark: output rows of processing-time processors cannot be read in event time.
    return this.node.timeMode === 'processingTime' ? null : inputWatermarkMs;
  }
}
