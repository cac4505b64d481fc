/**
 * The window nodes behind `window()` and `session_window()`, with Spark's argument checks; shared
 * by the function builders (functions.ts) and SQL text (lib/sql), which name them the same way.
 */
import type { Expr, SessionWindow, TimeWindow } from './expressions.js';
import { durationToMicros } from './intervals.js';
import { IllegalArgumentError } from '../errors/sluice-error.js';

/** Tumbling (`slide` omitted) or sliding windows; durations are interval strings or microseconds. */
export function timeWindowExpr(
  timeColumn: Expr,
  windowDuration: string | number,
  slideDuration?: string | number,
  startTime?: string | number,
): TimeWindow {
  const windowMicros = durationToMicros(windowDuration, 'duration');
  const slideMicros = slideDuration === undefined ? windowMicros : durationToMicros(slideDuration, 'slide duration');
  const startMicros = startTime === undefined ? 0 : durationToMicros(startTime, 'start time');
  if (windowMicros <= 0) {
    throw new IllegalArgumentError(`The window duration (${windowDuration}) must be greater than 0.`, { code: 'WINDOW_DURATION' });
  }
  if (slideMicros <= 0) {
    throw new IllegalArgumentError(`The slide duration (${slideDuration}) must be greater than 0.`, { code: 'WINDOW_SLIDE' });
  }
  if (slideMicros > windowMicros) {
    throw new IllegalArgumentError(
      `The slide duration (${slideDuration}) must be less than or equal to the windowDuration (${windowDuration}).`,
      { code: 'WINDOW_SLIDE' },
    );
  }
  if (Math.abs(startMicros) >= slideMicros) {
    throw new IllegalArgumentError(
      `The absolute value of start time (${startTime}) must be less than the slideDuration (${slideDuration ?? windowDuration}).`,
      { code: 'WINDOW_START' },
    );
  }
  return { kind: 'timeWindow', timeColumn, windowMicros, slideMicros, startMicros };
}

/** Session windows: a session closes after `gap` without events (a duration, or a per-row expression). */
export function sessionWindowExpr(timeColumn: Expr, gap: string | Expr): SessionWindow {
  const gapExpr: Expr = typeof gap === 'string'
    ? { kind: 'literal', value: durationToMicros(gap, 'gap'), type: 'interval' }
    : gap;
  return { kind: 'sessionWindow', timeColumn, gap: gapExpr };
}
