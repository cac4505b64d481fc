/**
 * One base error, one subclass per area. `code` is stable and searchable; `errorClass` carries
 * Spark's error class where Spark has one, so users can look the message up in Spark's docs.
 */
export interface SluiceErrorOptions {
  readonly code: string;
  readonly errorClass?: string;
  readonly hint?: string;
  readonly retryable?: boolean;
  readonly cause?: unknown;
  readonly context?: Record<string, unknown>;
  /**
   * The message without the data values it quotes (record contents, keys), for logs; the full
   * message goes where data may go (dead letters, the caller). Default: the message.
   */
  readonly logMessage?: string;
}

export class SluiceError extends Error {
  readonly code: string;
  readonly errorClass: string | undefined;
  readonly hint: string | undefined;
  readonly retryable: boolean;
  readonly context: Record<string, unknown>;
  /** The message without data values (see SluiceErrorOptions.logMessage), hint included. */
  readonly logMessage: string;

  constructor(message: string, options: SluiceErrorOptions) {
    super(options.hint ? `${message}\n  How to fix: ${options.hint}` : message, { cause: options.cause });
    this.name = new.target.name;
    this.code = options.code;
    this.errorClass = options.errorClass;
    this.hint = options.hint;
    this.retryable = options.retryable ?? false;
    this.context = options.context ?? {};
    this.logMessage = options.logMessage === undefined ? this.message
      : options.hint ? `${options.logMessage}\n  How to fix: ${options.hint}` : options.logMessage;
  }
}

/** A query that cannot run: wrong column, wrong type, unsupported shape for the output mode. */
export class AnalysisError extends SluiceError {}

/** A bad argument to an API call (Spark's IllegalArgumentException). */
export class IllegalArgumentError extends SluiceError {}

/** A failure while a streaming query runs (Spark's StreamingQueryException). */
export class StreamingQueryError extends SluiceError {}

/** A record that does not fit the schema: reported per record, routed to a dead-letter place. */
export class RecordDecodeError extends SluiceError {}

/** State or checkpoint storage failed or was contended (conditional write lost). */
export class CheckpointError extends SluiceError {}
