/** The log switch: data values in logged errors only at DEBUG (or TRACE). */
import { describe, expect, it } from 'vitest';
import { IllegalArgumentError, StreamingQueryError } from '../../lib/errors/sluice-error.js';
import { createObservability } from '../../lib/aws/observability.js';
import { loggableMessage, redactError } from '../../lib/aws/log-redaction.js';

const keyTooLong = (): IllegalArgumentError => new IllegalArgumentError('sink: key of row 0 is 3000 bytes, over 2048: SECRET-KEY...', {
  code: 'SINK_KEY_TOO_LONG', hint: 'key on fewer or shorter columns.', logMessage: 'sink: key of row 0 (columns note) is 3000 bytes, over 2048',
  context: { batchId: 7, note: 'SECRET-KEY' },
});

function logged(level: 'INFO' | 'DEBUG', error: Error): string {
  const lines: string[] = [];
  const { logger } = createObservability('q');
  // Powertools prints through its `console` field; a stand-in collects the lines.
  const print = (text: unknown): void => { lines.push(String(text)); };
  (logger as unknown as { console: Record<string, unknown> }).console = { error: print, warn: print, info: print, log: print, debug: print, trace: print };
  logger.setLogLevel(level);
  logger.error('batch failed', { shardId: 'shardId-0', error });
  return lines.join('');
}

describe('data values in logged errors', () => {
  it('are left out at INFO: the safe message, code, retryable, context names, stack frames', () => {
    const line = logged('INFO', keyTooLong());
    expect(line).not.toContain('SECRET-KEY');
    const { error } = JSON.parse(line) as { error: Record<string, unknown> };
    expect(error).toMatchObject({
      name: 'IllegalArgumentError', code: 'SINK_KEY_TOO_LONG', retryable: false,
      message: 'sink: key of row 0 (columns note) is 3000 bytes, over 2048\n  How to fix: key on fewer or shorter columns.',
      context: { batchId: 7, note: '<10 characters>' },
    });
    expect((error.stack as string[]).every((frame) => frame.startsWith('at '))).toBe(true);
  });

  it('are logged whole at DEBUG', () => {
    expect(logged('DEBUG', keyTooLong())).toContain('SECRET-KEY');
  });

  it('a wrapper repeating its cause\'s message, and a JSON parser\'s excerpt, are redacted too', () => {
    const cause = keyTooLong();
    const wrapper = new StreamingQueryError(`Query q terminated with exception: ${cause.message}`, { code: 'QUERY_FAILED', cause });
    expect(loggableMessage(wrapper)).toBe(`Query q terminated with exception: ${cause.logMessage}`);
    expect(JSON.stringify(redactError(wrapper))).not.toContain('SECRET-KEY');
    let parseError: Error | undefined;
    try { JSON.parse('{"card": "4111-1111-SECRET'); } catch (e) { parseError = e as Error; }
    expect(JSON.stringify(redactError(parseError!))).not.toContain('SECRET');
  });
});
