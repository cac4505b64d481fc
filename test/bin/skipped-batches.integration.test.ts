/**
 * Batches the event source mapping gives up on, end to end on the emulators: records that crash
 * the function on every delivery are the last records of a shard that is then split. The mapping
 * skips them to the on-failure destination (the real on-failure handler, fed Lambda's on-failure
 * record), which records the ranges; the split's children must then run (before, they waited for
 * their parent forever and were skipped in turn). `sluice status` lists the ranges waiting. The
 * query is one-stage stateful: a dry run through the query places the good record on the child
 * holding its key (test/bin/redrive-resharded runs that for real); `--skipped --into-stream` re-reads them from
 * the stream once: the good record is put back, the undecodable one dead-lettered with the reason;
 * after the re-drive the sink holds every good record.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PutRecordCommand } from '@aws-sdk/client-kinesis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { hourlySalesQuery } from '../../lib/local/dev/default-query.js';
import type { QueryStatus } from '../../lib/aws/query-inspection.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { readDeadLetters } from '../../lib/aws/s3-dead-letter-writer.js';
import { reshardStream } from '../../lib/local/kinesis-admin.js';
import { deploy } from '../support/aws-pipeline.js';
import { cliFor, crashingRecords, recordsIn } from '../support/skipped-ranges.js';

const QUERY = 'skipped-hourly-sales';
const stores = ['north', 'south', 'east', 'west', 'central'];
interface Sale { store_id: string; amount: number; ts: string }
const sale = (i: number): Sale => ({
  store_id: stores[(i * 7) % stores.length]!, amount: 1 + ((i * 13) % 29), ts: new Date(Date.UTC(2024, 4, 1, 14, 0) + i * 4 * 60_000).toISOString(),
});
const before = Array.from({ length: 16 }, (_, i) => sale(i));
const after = Array.from({ length: 16 }, (_, i) => sale(i + 17));
/** A good record and an undecodable one that crash the function (a bug) on every delivery: the parent's last records. */
const crashingGood = sale(16);
const crashingBad = '{"store_id": "north", "amount": ';

let emulators: EmulatorSet;
let dir: string;

beforeAll(async () => {
  emulators = await startEmulators();
  dir = mkdtempSync(join(tmpdir(), 'sluice-skipped-test-'));
});
afterAll(async () => {
  await emulators?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The sink the query must hold for `sales`: sum and count per (hour, store). */
function expectedRows(sales: readonly Sale[]): string[] {
  const groups = new Map<string, { sales: number; orders: number }>();
  for (const s of sales) {
    const key = `${s.ts.slice(0, 13)}|${s.store_id}`;
    const g = groups.get(key) ?? { sales: 0, orders: 0 };
    g.sales += s.amount;
    g.orders += 1;
    groups.set(key, g);
  }
  return [...groups].map(([k, g]) => `${k}|${g.sales}|${g.orders}`).sort();
}

function sinkRow(r: Record<string, unknown>): string {
  const start = (r.window as { start: unknown }).start;
  const iso = typeof start === 'string' ? start : new Date(Number(start) / (Number(start) > 1e14 ? 1000 : 1)).toISOString();
  return `${iso.replace(' ', 'T').slice(0, 13)}|${String(r.store_id)}|${Number(r.sales)}|${Number(r.orders)}`;
}

describe('batches the event source mapping gave up on', () => {
  it('are recorded, do not block a split\'s children, show in status and are re-driven once', async () => {
    const definition = hourlySalesQuery('update', QUERY);
    // The crashing records' sequence numbers are what crashes (a re-driven copy does not).
    const crash = crashingRecords();
    const deployment = await deploy(emulators, definition, 1, { asFunction: crash.asFunction });
    const { clients, config } = deployment;
    const cli = cliFor(emulators, config, QUERY, dir);

    await deployment.put(before.map((s) => ({ data: JSON.stringify(s), partitionKey: s.store_id })));
    // The crashing records, last on the shard.
    const { crashing, gaveUp } = crash;
    for (const [data, key] of [[JSON.stringify(crashingGood), crashingGood.store_id], [crashingBad, 'north']] as const) {
      const put = await clients.kinesis.send(new PutRecordCommand({ StreamName: config.streamName, PartitionKey: key, Data: Buffer.from(data) }));
      crashing.add(put.SequenceNumber!);
    }
    const [children] = await reshardStream(clients.kinesis, config.streamName, [{ split: 'first-open' }], { timeoutMs: 60_000 });
    expect(children).toHaveLength(2);
    await deployment.put(after.map((s) => ({ data: JSON.stringify(s), partitionKey: s.store_id })));

    const mapping = { batchSize: 10, ...crash.drainOptions(definition, config, emulators) };
    await deployment.drain(mapping);

    // Only the crashing records were given up (bisected down to each); the children ran after their parent.
    expect(gaveUp.map((g) => [g.startSequenceNumber, g.endSequenceNumber]).sort()).toEqual([...crashing].map((s) => [s, s]).sort());
    const sink = async () => (await scanDynamoDbSink(clients.dynamodb, config.sinkTable!)).map(sinkRow).sort();
    expect(await sink()).toEqual(expectedRows([...before, ...after]));

    const status = await cli(['status', QUERY, '--json']);
    expect(status.code, status.stderr).toBe(1);
    const s = JSON.parse(status.stdout) as QueryStatus;
    expect(s.healthy).toBe(false);
    expect(s.skippedRanges.map((r) => r.firstSequenceNumber).sort()).toEqual([...crashing].sort());
    expect(s.skippedRanges.every((r) => r.partitionId === 'shardId-000000000000' && r.state === 'waiting' && /RetryAttemptsExhausted/.test(r.reason))).toBe(true);
    const text = await cli(['status', QUERY]);
    expect(text.stdout).toMatch(/skipped ranges waiting for a re-drive: 2/);

    // Through the query (one stage keeps the state per shard): the parent's records go to the child holding their key; a dry run writes nothing.
    const through = await cli(['redrive', QUERY, '--skipped', '--dry-run', '--query-module', 'test/bin/fixtures/skipped-sales.ts', '--json']);
    expect(through.code, through.stderr).toBe(0);
    expect(JSON.parse(through.stdout)).toMatchObject({ into: 'query', redriven: 1, deadLettered: 1, expired: 0 });
    expect((JSON.parse((await cli(['status', QUERY, '--json'])).stdout) as QueryStatus).skippedRanges).toHaveLength(2);

    const dry = await cli(['redrive', QUERY, '--skipped', '--into-stream', '--dry-run', '--query-module', 'test/bin/fixtures/skipped-sales.ts', '--json']);
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ into: 'stream', redriven: 1, deadLettered: 1, expired: 0, alreadyCommitted: 0 });

    const inStream = await recordsIn(clients.kinesis, config.streamName);
    const redrive = await cli(['redrive', QUERY, '--skipped', '--into-stream', '--query-module', 'test/bin/fixtures/skipped-sales.ts']);
    expect(redrive.code, redrive.stderr).toBe(0);
    expect(redrive.stdout).toMatch(/re-drove 1 record\(s\) of 2 skipped range\(s\) into the source stream \(every consumer of the stream reads them again\)/);
    expect(await recordsIn(clients.kinesis, config.streamName)).toBe(inStream + 1);
    const letters = await readDeadLetters(clients.s3, config.deadLetterBucket, `dead-letter/${QUERY}/`);
    expect(letters).toHaveLength(1);
    expect(Buffer.from(letters[0]!.dataBase64, 'base64').toString()).toBe(crashingBad);
    expect(letters[0]!.reason).toMatch(/^skipped by the event source mapping \(RetryAttemptsExhausted.*\), then refused by the source: /);

    // Once: a second run finds both ranges re-driven and sends nothing.
    const again = await cli(['redrive', QUERY, '--skipped', '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ redriven: 0, deadLettered: 0, alreadyRedriven: 2 });
    const healthy = JSON.parse((await cli(['status', QUERY, '--json'])).stdout) as QueryStatus;
    expect(healthy.skippedRanges).toEqual([]);

    // The re-driven copy runs in a child shard: the sink now holds every good record.
    await deployment.drain(mapping);
    expect(await sink()).toEqual(expectedRows([...before, crashingGood, ...after]));
  }, 300_000);
});
