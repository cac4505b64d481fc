/**
 * No data values in logs: a run on the emulators through the real Kinesis-trigger handler with
 * Powertools' real logger, where one record is dead-lettered (a field of the wrong type) and one
 * result key is too long for DynamoDB. The captured log lines must hold neither recognisable
 * value; the dead-letter object (data storage) still holds the record and its reason.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineQuery } from '../../lib/query/query-definition.js';
import { readDeadLetters } from '../../lib/aws/s3-dead-letter-writer.js';
import { createObservability } from '../../lib/aws/observability.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { col, count, sum } from '../../lib/plan/functions.js';
import { deploy } from '../support/aws-pipeline.js';

const BAD_AMOUNT = 'IBAN-DE89370400440532013000';
const LONG_NOTE = `SECRET-CUSTOMER-NOTE-${'x'.repeat(3000)}`;

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

/** Everything written to stdout and stderr while `run` runs. */
async function captureOutput(run: () => Promise<void>): Promise<string> {
  const chunks: string[] = [];
  const [out, err] = [process.stdout.write.bind(process.stdout), process.stderr.write.bind(process.stderr)];
  const capture = (chunk: unknown): boolean => { chunks.push(String(chunk)); return true; };
  process.stdout.write = capture as typeof process.stdout.write;
  process.stderr.write = capture as typeof process.stderr.write;
  try {
    await run();
  } finally {
    process.stdout.write = out;
    process.stderr.write = err;
  }
  return chunks.join('');
}

describe('logs without data values (emulators, real Powertools logger)', () => {
  it('a dead-lettered record and a key too long for the sink: codes and lengths in the logs, the values only in the dead letter', async () => {
    const definition = defineQuery({
      name: 'orders-by-note',
      source: { schema: 'note string, amount long, ts timestamp' },
      transform: (events) => events.groupBy(col('note')).agg(sum('amount').as('total'), count('*').as('orders')),
      outputMode: 'update',
      sink: { kind: 'dynamodb' },
    });
    const d = await deploy(emulators, definition, 1);
    await d.put([
      { data: JSON.stringify({ note: 'ok', amount: BAD_AMOUNT, ts: '2024-05-01T12:00:00Z' }), partitionKey: 'a' },
      { data: JSON.stringify({ note: LONG_NOTE, amount: 5, ts: '2024-05-01T12:01:00Z' }), partitionKey: 'a' },
    ]);
    const observability = createObservability(definition.name);
    const logs = await captureOutput(() => d.drain({ maximumRetryAttempts: 1, bisectBatchOnFunctionError: false }, { observability }));

    expect(logs).not.toContain('SECRET-CUSTOMER-NOTE');
    expect(logs).not.toContain(BAD_AMOUNT);
    // The records are kept where data belongs, with reasons that quote them.
    const deadLetters = await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix);
    const text = (b64: string): string => Buffer.from(b64, 'base64').toString('utf8');
    const badAmount = deadLetters.find((x) => text(x.dataBase64).includes(BAD_AMOUNT));
    expect(badAmount?.reason).toContain(BAD_AMOUNT);
    // A key too long for the sink fails the batch (logged, redacted) until the sink-refusal policy
    // dead-letters it instead; either way its value stays out of the logs.
    if (!deadLetters.some((x) => text(x.dataBase64).includes('SECRET-CUSTOMER-NOTE'))) {
      expect(logs).toContain('SINK_KEY_TOO_LONG');
      expect(logs).toMatch(/is \d+ bytes, over DynamoDB's 2048/);
    }
  }, 120_000);
});
