/**
 * Figures derived from one StreamingQueryProgress, shared by the CloudWatch metrics and the
 * `sluice dev --ui` page so both show the same numbers for the same batch.
 */
import type { StreamingQueryProgress } from './progress.js';

export interface ProgressLags {
  /** Batch start minus the watermark (undefined without a watermark). */
  readonly watermarkLagMs: number | undefined;
  /** Batch start minus the newest event time read (undefined when the batch read no rows with one). */
  readonly eventTimeLagMs: number | undefined;
}

export function progressLags(p: StreamingQueryProgress): ProgressLags {
  const startMs = Date.parse(p.timestamp);
  const maxEventMs = p.eventTime.max !== undefined ? Date.parse(p.eventTime.max) : Number.NaN;
  return {
    watermarkLagMs: p.eventTime.watermark !== undefined && p.batchWatermarkMs > 0 ? startMs - p.batchWatermarkMs : undefined,
    eventTimeLagMs: Number.isFinite(maxEventMs) ? startMs - maxEventMs : undefined,
  };
}

/** The dimension value that names a stateful operator: its position in the plan and its name. */
export function operatorLabel(index: number, operatorName: string): string {
  return `${index}:${operatorName}`;
}

export function totalStateRows(p: StreamingQueryProgress): number {
  return p.stateOperators.reduce((n, op) => n + op.numRowsTotal, 0);
}

export function totalRowsDroppedByWatermark(p: StreamingQueryProgress): number {
  return p.stateOperators.reduce((n, op) => n + op.numRowsDroppedByWatermark, 0);
}
