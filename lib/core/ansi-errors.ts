/**
 * Errors Spark 4 raises under ANSI mode (`spark.sql.ansi.enabled`, on by default) because of a
 * value: every retry of the batch would raise them again. Spark fails the query; on the streaming
 * runtime Sluice dead-letters the record that raised one (lib/query/unwritable-rows.ts). Messages
 * follow Spark's error classes (with the SQLSTATE), so users can search them; the `try_*` forms
 * give NULL instead.
 */
import { SluiceError } from '../errors/sluice-error.js';

/** A value-dependent ANSI error: ARITHMETIC_OVERFLOW, CAST_OVERFLOW, DIVIDE_BY_ZERO, CAST_INVALID_INPUT. */
export class AnsiDataError extends SluiceError {}

const ANSI_CONFIG = '"spark.sql.ansi.enabled"';

/** Spark's DIVIDE_BY_ZERO (SQLSTATE 22012), for `/` and `%` with a zero divisor. */
export function divideByZero(): AnsiDataError {
  return new AnsiDataError(
    `[DIVIDE_BY_ZERO] Division by zero. Use \`try_divide\` to tolerate divisor being 0 and return NULL instead. If necessary set ${ANSI_CONFIG} to "false" to bypass this error. SQLSTATE: 22012`,
    { code: 'DIVIDE_BY_ZERO', errorClass: 'DIVIDE_BY_ZERO', retryable: false, hint: 'use try_divide (or try_mod), or filter the zero divisors first.' },
  );
}

/** Spark's CAST_INVALID_INPUT (SQLSTATE 22018): a string that is not a value of the target type. */
export function castInvalidInput(value: string, sourceType: string, targetType: string): AnsiDataError {
  // Spark quotes the value; a long one is cut so a reason never carries a whole payload.
  const shown = value.length > 40 ? `${value.slice(0, 40)}...` : value;
  // Spark 4.0.1's datetime form of the message (invalidInputInCastToDatetimeError) has no sentence on the ANSI setting.
  const bypass = targetType === 'date' || targetType === 'timestamp' ? '' : `If necessary set ${ANSI_CONFIG} to "false" to bypass this error. `;
  const message = (quoted: string): string => `[CAST_INVALID_INPUT] The value ${quoted} of the type "${sourceType.toUpperCase()}" cannot be cast to "${targetType.toUpperCase()}" because it is malformed. `
    + `Correct the value as per the syntax, or change its target type. Use \`try_cast\` to tolerate malformed input and return NULL instead. ${bypass}SQLSTATE: 22018`;
  return new AnsiDataError(message(`'${shown}'`), {
    code: 'CAST_INVALID_INPUT', errorClass: 'CAST_INVALID_INPUT', retryable: false, hint: 'use try_cast, or fix the producer of the value.',
    // Logs carry no data values (lib/aws/log-redaction.ts); the dead letter, which holds the record, has the full message.
    logMessage: message(`<${value.length} characters>`),
  });
}
