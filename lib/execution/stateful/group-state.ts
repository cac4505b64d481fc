import { intervalToDelayMs, parseInterval } from '../../plan/intervals.js';
import type { DataType } from '../../plan/data-types.js';
import type { GroupState, GroupStateTimeout } from '../../plan/stateful-processor.js';
import { IllegalArgumentError } from '../../errors/sluice-error.js';
import { readableValue, storableValue } from './state-values.js';

/** Spark's UnsupportedOperationException / NoSuchElementException from GroupStateImpl. */
function refusal(message: string, code: string, hint: string, errorClass?: string): IllegalArgumentError {
  return new IllegalArgumentError(errorClass ? `[${errorClass}] ${message}` : message, { code, hint, ...(errorClass ? { errorClass } : {}) });
}

function durationMs(duration: number | string): number {
  return typeof duration === 'number' ? duration : intervalToDelayMs(parseInterval(duration));
}

/**
 * Spark's GroupStateImpl for one call of the user's function. The timeout starts unset on every
 * call: a function that wants it kept sets it again (Spark resets it, see callFunctionAndUpdateState).
 */
export class GroupStateImpl<S> implements GroupState<S> {
  private value: S | undefined;
  updated = false;
  removed = false;
  timeoutMs: number | null = null;

  constructor(
    stored: S | undefined,
    private readonly timeout: GroupStateTimeout,
    private readonly batchTimestampMs: number,
    private readonly watermarkMs: number | null,
    private readonly timedOut: boolean,
    private readonly stateType: DataType | null,
  ) {
    this.value = stored;
  }

  exists(): boolean {
    return this.value !== undefined;
  }

  get(): S {
    if (this.value === undefined) {
      throw refusal('State is either not defined or has already been removed', 'STATE_NOT_DEFINED', 'check exists() (or use getOption()) before get().');
    }
    return readableValue(this.value);
  }

  getOption(): S | undefined {
    return this.value === undefined ? undefined : readableValue(this.value);
  }

  update(state: S): void {
    if (state === null || state === undefined) {
      throw refusal("'null' is not a valid state value", 'NULL_STATE_VALUE', 'call remove() to drop the state.');
    }
    this.value = storableValue(state, 'GroupState', this.stateType);
    this.updated = true;
    this.removed = false;
  }

  remove(): void {
    this.value = undefined;
    this.removed = true;
    this.updated = false;
  }

  hasTimedOut(): boolean {
    return this.timedOut;
  }

  setTimeoutDuration(duration: number | string): void {
    if (this.timeout !== 'processingTime') {
      throw refusal('Cannot set timeout duration without enabling processing time timeout in [map|flatMap]GroupsWithState', 'TIMEOUT_NOT_ENABLED',
        "pass { timeout: 'processingTime' } to [flat]mapGroupsWithState.");
    }
    const ms = durationMs(duration);
    if (!(ms > 0)) throw refusal('Timeout duration must be positive', 'INVALID_TIMEOUT', 'pass a positive duration.');
    this.timeoutMs = this.batchTimestampMs + ms;
  }

  setTimeoutTimestamp(timestampMs: number, additionalDuration?: string): void {
    if (this.timeout !== 'eventTime') {
      throw refusal('Cannot set timeout timestamp without enabling event time timeout in [map|flatMapGroupsWithState', 'TIMEOUT_NOT_ENABLED',
        "pass { timeout: 'eventTime' } to [flat]mapGroupsWithState (and define a watermark).");
    }
    const ms = timestampMs + (additionalDuration === undefined ? 0 : durationMs(additionalDuration));
    if (!(ms > 0)) throw refusal('Timeout timestamp must be positive', 'INVALID_TIMEOUT', 'pass epoch milliseconds.');
    if (this.watermarkMs !== null && ms < this.watermarkMs) {
      throw refusal(`Timeout timestamp (${ms}) cannot be earlier than the current watermark (${this.watermarkMs}).`, 'INVALID_TIMEOUT_TIMESTAMP',
        'set the timeout at or after getCurrentWatermarkMs(), e.g. Math.max(eventTimeMs, state.getCurrentWatermarkMs()).', 'INVALID_TIMEOUT_TIMESTAMP');
    }
    this.timeoutMs = ms;
  }

  getCurrentWatermarkMs(): number {
    if (this.watermarkMs === null) {
      throw refusal('Cannot get event time watermark timestamp without setting watermark before [map|flatMap]GroupsWithState', 'NO_WATERMARK',
        'call withWatermark(eventTimeColumn, delay) before groupByKey.');
    }
    return this.watermarkMs;
  }

  getCurrentProcessingTimeMs(): number {
    return this.batchTimestampMs;
  }
}
