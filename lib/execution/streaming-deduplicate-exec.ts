import { typeToString } from '../plan/data-types.js';
import type { Attribute } from '../plan/attribute.js';
import type { StateStoreId } from '../state/state-store.js';
import type { Row } from './evaluate.js';
import { emptyOperatorProgress, type BatchContext, type Exec, type StateOperatorProgress, type StatefulExec, type WatermarkContext } from './physical.js';
import { encodeKey } from './values.js';

/** Reads an event-time column in ms: a timestamp, or the end of a window struct. */
/** The expiry of a key that is never evicted (a JSON-safe number, unlike Infinity). */
const NEVER_EVICTED_MS = Number.MAX_SAFE_INTEGER;

export function eventTimeReader(attrs: readonly Attribute[], ordinalOf: (a: Attribute) => number): ((row: Row) => number | null) | null {
  const attr = attrs.find((a) => a.eventTimeDelayMs !== null);
  if (!attr) return null;
  const i = ordinalOf(attr);
  if (typeof attr.type === 'object') {
    return (row) => {
      const w = row[i] as { end: number } | null;
      return w === null ? null : w.end / 1000;
    };
  }
  return (row) => {
    const t = row[i] as number | null;
    return t === null ? null : t / 1000;
  };
}

/**
 * Spark's StreamingDeduplicateExec and, with `withinWatermark`, StreamingDeduplicateWithinWatermarkExec.
 * Keeps the first row per key. Late rows (event time <= the late-events watermark) are dropped.
 * State: key -> expiry time in ms; for plain dedup it is the key's event time (evicted when the key
 * contains the event-time column), within the watermark it is event time + delay.
 */
export class StreamingDeduplicateExec implements StatefulExec {
  readonly nodeName: string;
  readonly children: readonly Exec[];
  readonly output: readonly Attribute[];
  readonly stateStoreIds: readonly StateStoreId[];
  readonly stateSchema: string;
  private readonly keyOrdinals: number[];
  private readonly rowEventTimeMs: ((row: Row) => number | null) | null;
  private readonly keyHasEventTime: boolean;
  private readonly delayMs: number;
  private progress: StateOperatorProgress = emptyOperatorProgress('dedupe');
  private lastEvictionWatermarkMs: number | null = null;

  constructor(
    readonly operatorId: number,
    private readonly child: Exec,
    keys: readonly Attribute[],
    private readonly withinWatermark: boolean,
  ) {
    this.nodeName = withinWatermark ? 'DedupWithinWatermark' : 'Dedup';
    this.children = [child];
    this.output = child.output;
    const ordinalOf = (a: Attribute): number => child.output.findIndex((x) => x.id === a.id);
    this.keyOrdinals = keys.map(ordinalOf);
    this.rowEventTimeMs = eventTimeReader(child.output, ordinalOf);
    const eventTimeAttr = child.output.find((a) => a.eventTimeDelayMs !== null);
    this.keyHasEventTime = keys.some((k) => k.eventTimeDelayMs !== null);
    this.delayMs = eventTimeAttr?.eventTimeDelayMs ?? 0;
    this.stateStoreIds = [{ operatorId, storeName: 'default' }];
    this.stateSchema = `dedup(withinWatermark=${withinWatermark}, keys=[${keys.map((k) => `${k.name}:${typeToString(k.type)}`).join(', ')}])`;
  }

  execute(ctx: BatchContext): Row[] {
    const input = this.child.execute(ctx);
    const store = ctx.store<number>(this.stateStoreIds[0]!);
    const progress = emptyOperatorProgress(this.withinWatermark ? 'dedupeWithinWatermark' : 'dedupe');
    let droppedDuplicates = 0;
    const eventTime = this.rowEventTimeMs;
    const lateMs = ctx.hasWatermark && eventTime ? ctx.lateEventsWatermarkMs(this.operatorId) : null;
    const output: Row[] = [];
    for (const row of input) {
      const t = eventTime ? eventTime(row) : null;
      if (lateMs !== null && t !== null && t <= lateMs) {
        progress.numRowsDroppedByWatermark++;
        continue;
      }
      const key = encodeKey(this.keyOrdinals.map((i) => row[i]));
      if (store.get(key) !== undefined) {
        droppedDuplicates++;
        continue;
      }
      // A key whose event time is NULL never passes Spark's `eventTime <= watermark` eviction
      // predicate (NULL is not true): it stays for good.
      const expiresAtMs = this.withinWatermark ? (t ?? 0) + this.delayMs : this.keyHasEventTime ? (t ?? NEVER_EVICTED_MS) : 0;
      store.put(key, expiresAtMs);
      progress.numRowsUpdated++;
      output.push(row);
    }

    const evicts = ctx.hasWatermark && (this.withinWatermark || this.keyHasEventTime);
    if (evicts) {
      const evictMs = ctx.evictionWatermarkMs(this.operatorId);
      const expired: string[] = [];
      for (const [key, expiresAtMs] of store.entries()) if (expiresAtMs <= evictMs) expired.push(key);
      for (const key of expired) store.remove(key);
      progress.numRowsRemoved = expired.length;
    }
    this.recordEvictionWatermark(ctx);
    progress.numRowsTotal = store.size;
    progress.numOutputRows = output.length;
    progress.customMetrics = { numDroppedDuplicateRows: droppedDuplicates };
    this.progress = progress;
    return output;
  }

  lastProgress(): StateOperatorProgress {
    return this.progress;
  }

  recordEvictionWatermark(ctx: WatermarkContext): void {
    this.lastEvictionWatermarkMs = ctx.hasWatermark ? ctx.evictionWatermarkMs(this.operatorId) : null;
  }

  shouldRunAnotherBatch(newInputWatermarkMs: number): boolean {
    return this.lastEvictionWatermarkMs !== null && newInputWatermarkMs > this.lastEvictionWatermarkMs;
  }

  produceOutputWatermark(inputWatermarkMs: number): number | null {
    return inputWatermarkMs;
  }
}
