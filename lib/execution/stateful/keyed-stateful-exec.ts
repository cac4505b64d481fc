import type { StatefulProcessingNode } from '../../plan/logical-plan.js';
import type { StateStoreId } from '../../state/state-store.js';
import type { Attribute } from '../../plan/attribute.js';
import type { Row } from '../evaluate.js';
import { emptyOperatorProgress, type BatchContext, type Exec, type StateOperatorProgress, type StatefulExec, type WatermarkContext } from '../physical.js';

/**
 * What FlatMapGroupsWithStateExec and TransformWithStateExec share: one state store, the progress
 * of the last batch, and when a no-data batch is due (Spark's shouldRunAnotherBatch in event time;
 * the earliest processing-time timer, and on Lambda the earliest TTL, otherwise).
 */
export abstract class KeyedStatefulExec implements StatefulExec {
  abstract readonly nodeName: string;
  abstract readonly stateSchema: string;
  readonly children: readonly Exec[];
  readonly output: readonly Attribute[];
  readonly stateStoreIds: readonly StateStoreId[];
  protected progress: StateOperatorProgress;
  private lastEvictionWatermarkMs: number | null = null;
  /** The time a batch must be past for a timer to fire (null: none; undefined: not run here yet). */
  protected nextTimer: number | null | undefined = undefined;
  /** The same for the earliest TTL expiry. */
  protected nextExpiry: number | null | undefined = undefined;

  constructor(readonly operatorId: number, protected readonly child: Exec, protected readonly node: StatefulProcessingNode, private readonly progressName: string) {
    this.children = [child];
    this.output = node.output;
    this.stateStoreIds = [{ operatorId, storeName: 'default' }];
    this.progress = emptyOperatorProgress(progressName);
  }

  abstract execute(ctx: BatchContext): Row[];

  protected newProgress(): StateOperatorProgress {
    return emptyOperatorProgress(this.progressName);
  }

  lastProgress(): StateOperatorProgress {
    return this.progress;
  }

  recordEvictionWatermark(ctx: WatermarkContext): void {
    this.lastEvictionWatermarkMs = ctx.hasWatermark ? ctx.evictionWatermarkMs(this.operatorId) : null;
  }

  shouldRunAnotherBatch(newInputWatermarkMs: number): boolean {
    // Spark: event time re-runs when the watermark moves; processing time is nextTimerMs()'s.
    return this.node.timeMode === 'eventTime' && this.lastEvictionWatermarkMs !== null && newInputWatermarkMs > this.lastEvictionWatermarkMs;
  }

  nextTimerMs(): number | null | undefined {
    return this.node.timeMode === 'processingTime' ? this.nextTimer : null;
  }

  nextStateExpiryMs(): number | null | undefined {
    return this.nextExpiry;
  }

  abstract produceOutputWatermark(inputWatermarkMs: number): number | null;
}
