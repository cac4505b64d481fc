/**
 * Logs carry no data values unless debug logging is on. An error's message may quote a record or
 * a key (a key too long for the sink, a JSON parser's excerpt of its input); CloudWatch Logs are
 * kept, searched and shared more widely than the dead-letter objects that hold the records. So a
 * logged error shows its name, code, retryable flag, hint and where it was thrown, with the
 * message the error declares safe for logs (SluiceError.logMessage). At log level DEBUG or TRACE
 * (POWERTOOLS_LOG_LEVEL) the whole error is logged, as Powertools formats it.
 */
import { SluiceError } from '../errors/sluice-error.js';

/** A parser's message quotes its input (V8: `Unexpected token 'x', "..." is not valid JSON`). */
function quotesInput(error: Error): boolean {
  return error instanceof SyntaxError;
}

/** The error's message with the data values it quotes left out, its causes' included. */
export function loggableMessage(error: Error): string {
  let message = error instanceof SluiceError ? error.logMessage : quotesInput(error) ? `${error.name} (message withheld: it quotes the input)` : error.message;
  // A wrapper that repeats its cause's message (`... terminated with exception: <cause>`) repeats its data too.
  for (let cause = error.cause; cause instanceof Error; cause = cause.cause) {
    const safe = loggableMessage(cause);
    if (safe !== cause.message && cause.message !== '' && message.includes(cause.message)) message = message.split(cause.message).join(safe);
  }
  return message;
}

/** The stack frames only: V8 starts `stack` with `<name>: <message>`, which may hold data. */
function framesOf(stack: string | undefined): string[] {
  return (stack ?? '').split('\n').filter((line) => /^\s+at /.test(line)).map((line) => line.trim());
}

export function redactError(error: Error): Record<string, unknown> {
  const out: Record<string, unknown> = { name: error.name, message: loggableMessage(error) };
  if (error instanceof SluiceError) {
    out.code = error.code;
    out.retryable = error.retryable;
    if (error.errorClass) out.errorClass = error.errorClass;
    // Context entries are named facts (batch id, shard, column); their names are kept, and values that are numbers or booleans.
    const context = Object.entries(error.context);
    if (context.length > 0) {
      out.context = Object.fromEntries(context.map(([k, v]) => [k, typeof v === 'number' || typeof v === 'boolean' ? v : typeof v === 'string' ? `<${v.length} characters>` : `<${typeof v}>`]));
    }
  } else {
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string') out.code = code;
  }
  out.stack = framesOf(error.stack);
  if (error.cause instanceof Error) out.cause = redactError(error.cause);
  return out;
}

/**
 * A Powertools `jsonReplacerFn`: errors become their redacted form unless `includeDataValues()`
 * says debug logging is on (then Powertools formats them whole).
 */
export function dataRedactingReplacer(includeDataValues: () => boolean): (key: string, value: unknown) => unknown {
  return (_key, value) => (value instanceof Error && !includeDataValues() ? redactError(value) : value);
}
