/**
 * The guard that keeps one bad timestamp from moving the watermark: a record whose event time is
 * further ahead of the time it reached Kinesis than the allowed skew is dead-lettered with the
 * reason and never reaches the watermark operator.
 *
 * "Processing time" is the record's own ApproximateArrivalTimestamp, not the invocation's clock:
 * it is fixed per record, so a re-run of a planned batch judges every record exactly as the first
 * run did (exactly-once needs a deterministic batch), and it does not depend on how late Lambda
 * got to the shard. In-memory sources (MemoryStream, testStream, the conformance scenarios) have
 * no arrival time and are never checked: their manual clocks start near 0 while event times are
 * real dates. Nor is a record whose arrival time is unknown (0).
 */
import { IllegalArgumentError } from '../errors/sluice-error.js';
import { intervalToDelayMs, parseInterval } from '../plan/intervals.js';
import { planChildren, type LogicalPlan } from '../plan/logical-plan.js';

export const MAX_EVENT_TIME_SKEW_CONF = 'sluice.streaming.maxEventTimeSkew';
/**
 * An hour: producers' clocks (NTP) are seconds apart and batching producers only make event time
 * earlier than arrival, so anything an hour ahead is a broken clock or a bad value; an hour also
 * bounds how far one such record could have pushed the watermark past everyone else's data.
 */
export const DEFAULT_MAX_EVENT_TIME_SKEW = '1 hour';

/** The allowed skew in ms, or null when the check is off (`none`). */
export function parseMaxEventTimeSkew(value: string | undefined): number | null {
  const text = (value ?? DEFAULT_MAX_EVENT_TIME_SKEW).trim();
  if (text.toLowerCase() === 'none') return null;
  let ms: number;
  try {
    ms = intervalToDelayMs(parseInterval(text));
  } catch (cause) {
    throw new IllegalArgumentError(`${MAX_EVENT_TIME_SKEW_CONF} must be an interval such as '1 hour', or 'none' (got '${text}').`, {
      code: 'INVALID_EVENT_TIME_SKEW', cause,
    });
  }
  if (!(ms >= 0)) {
    throw new IllegalArgumentError(`${MAX_EVENT_TIME_SKEW_CONF} must not be negative (got '${text}').`, { code: 'INVALID_EVENT_TIME_SKEW' });
  }
  return ms;
}

/** What a source checks: its timestamp column that a watermark is defined on, and the skew. */
export interface EventTimeLimit {
  readonly column: string;
  readonly maxSkewMs: number;
}

/**
 * The source columns of `sourceId` that a watermark is defined on directly (the same attribute,
 * possibly passed through projections). A watermark on a derived column is not checked at the
 * source (the derivation may depend on other columns).
 */
export function watermarkSourceColumns(plan: LogicalPlan, sourceId: string): string[] {
  const eventTimeIds = new Set<number>();
  const sourceColumns = new Map<number, string>();
  const visit = (p: LogicalPlan): void => {
    if (p.kind === 'EventTimeWatermark' && typeof p.eventTime.type === 'string') eventTimeIds.add(p.eventTime.id);
    if (p.kind === 'StreamingRelation' && p.sourceId === sourceId) {
      for (const a of p.output) if (a.type === 'timestamp') sourceColumns.set(a.id, a.name);
    }
    planChildren(p).forEach(visit);
  };
  visit(plan);
  return [...eventTimeIds].flatMap((id) => (sourceColumns.has(id) ? [sourceColumns.get(id)!] : []));
}

/** The limit a source of `sourceId` applies under `conf`, or undefined (no watermark column, or off). */
export function eventTimeLimitFor(plan: LogicalPlan, sourceId: string, conf: ReadonlyMap<string, string>): EventTimeLimit | undefined {
  const maxSkewMs = parseMaxEventTimeSkew(conf.get(MAX_EVENT_TIME_SKEW_CONF));
  const [column] = watermarkSourceColumns(plan, sourceId);
  return maxSkewMs === null || column === undefined ? undefined : { column, maxSkewMs };
}

/** Why a record whose event time is `eventMicros` must not reach the watermark, or null. */
export function eventTimeSkewReason(limit: EventTimeLimit, eventMicros: number, arrivalMs: number): string | null {
  // No arrival time (0: test fixtures, records replayed without Kinesis metadata): nothing to compare to.
  if (!(arrivalMs > 0)) return null;
  const eventMs = Math.floor(eventMicros / 1000);
  if (eventMs - arrivalMs <= limit.maxSkewMs) return null;
  return `event time ${limit.column}=${new Date(eventMs).toISOString()} is ${eventMs - arrivalMs} ms ahead of the record's arrival `
    + `(${new Date(arrivalMs).toISOString()}), more than ${MAX_EVENT_TIME_SKEW_CONF} (${limit.maxSkewMs} ms) allows: `
    + 'it would move the watermark past on-time records';
}
