/**
 * Issue 11 on the emulators: in a one-stage query a result row left out of its batch (here a
 * window whose sum is 0, divided by, emitted from state by a later batch) is dead-lettered as
 * `result-batch-…` under the source shard's own id. Its data is the output row, not a source
 * record: `--into-stream` put it into the source stream, and the re-drive through the query ran it
 * through the query as a record. Both re-drives, dry and real, now leave it (`resultRows`) and
 * still re-drive the source record the query dead-lettered.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineQuery } from '../../lib/query/query-definition.js';
import { readDeadLetters } from '../../lib/aws/s3-dead-letter-writer.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { redriveDeadLetters } from '../../lib/aws/dead-letter-redrive.js';
import { reprocessDeadLetters } from '../../lib/aws/dead-letter-reprocess.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { col, count, lit, sum, window } from '../../lib/plan/functions.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { deploy, type Deployment } from '../support/aws-pipeline.js';
import { sourceRecords } from '../support/source-stream-records.js';
import { emulatorCliEnv, runSluice } from '../support/sluice-cli.js';

const at = (s: number): string => new Date(Date.UTC(2024, 4, 1, 12) + s * 1000).toISOString();
// Partitioned by the grouping key: one stage, whose dead letters carry the source shard's id.
const ratio = defineQuery({
  name: 'result-row-letters', source: { schema: 'k string, amount long, ts timestamp', partitionKey: 'k' }, outputMode: 'append',
  sink: { kind: 'dynamodb', keyColumns: ['start', 'k'] },
  transform: (df) => df.withWatermark('ts', '10 seconds').groupBy(window(col('ts'), '10 seconds'), col('k'))
    .agg(sum(col('amount')).as('s'), count('*').as('n'))
    .select(col('window.start').as('start'), col('k'), lit(100).divide(col('s')).as('r'), col('n')),
});

const sinkRows = async (d: Deployment): Promise<unknown[]> =>
  (await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!)).map((r) => [r.k, r.r, Number(r.n)]).sort();

/** The window of 'a' sums to 0; the later steps move the watermark past it, so a batch without its records emits it. */
async function runWithRaisingRow(d: Deployment): Promise<string[]> {
  const record = (e: { k: string; amount: number; ts: string }) => ({ data: JSON.stringify(e), partitionKey: e.k });
  // Dead-lettered as a source record (bad JSON): the control that still re-drives.
  const broken = { data: '{"k": "a", "amount": 1, "ts": "not a time', partitionKey: 'a' };
  const steps = [
    [record({ k: 'a', amount: 5, ts: at(1) }), record({ k: 'a', amount: -5, ts: at(2) }), record({ k: 'b', amount: 4, ts: at(3) }), broken],
    [record({ k: 'a', amount: 1, ts: at(60) }), record({ k: 'b', amount: 2, ts: at(61) })],
    [record({ k: 'a', amount: 1, ts: at(120) })],
  ];
  await d.drainInSteps(steps.length, async (i) => d.put(steps[i]!));
  expect(d.results.map((r) => r.result.error?.message).filter(Boolean)).toEqual([]);
  return steps.flat().map((r) => r.data);
}

let emulators: EmulatorSet;
let dir: string;
beforeAll(async () => {
  emulators = await startEmulators();
  dir = mkdtempSync(join(tmpdir(), 'sluice-result-row-letters-'));
});
afterAll(async () => {
  await emulators?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('result-row dead letters of a one-stage query (DynamoDB Local, kinesis-mock, s3rver)', () => {
  it('a row raising above state is filed under the source shard; neither re-drive, dry or real, takes it for a source record', async () => {
    expect(compileQuery(ratio).hops).toHaveLength(0);
    const d = await deploy(emulators, ratio, 1);
    const events = await runWithRaisingRow(d);
    const letters = await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix);
    const resultRow = letters.filter((l) => l.sequenceNumber.startsWith('result-batch-'));
    const sourceRecord = letters.filter((l) => !l.sequenceNumber.startsWith('result-batch-'));
    // Why a re-drive took it for a record: it is filed under the source shard's own id, like the record's letter.
    expect(resultRow.map((l) => [l.shardId, /^DIVIDE_BY_ZERO/.test(l.reason)])).toEqual([['shardId-000000000000', true]]);
    expect(JSON.parse(Buffer.from(resultRow[0]!.dataBase64, 'base64').toString())).toMatchObject({ k: 'a', s: 0, n: 2 });
    expect(sourceRecord.map((l) => l.shardId)).toEqual(['shardId-000000000000']);
    const sinkBefore = await sinkRows(d);
    expect(sinkBefore).toEqual([['a', 100, 1], ['b', 25, 1], ['b', 50, 1]]);
    expect(await sourceRecords(d)).toEqual(events);

    const deployment = { ...d.config, sluiceQuery: ratio.name };
    const dryInto = await redriveDeadLetters(d.clients, deployment, { dryRun: true });
    expect([dryInto.wouldRedrive, dryInto.resultRows, dryInto.notFromSource]).toEqual([1, 1, 0]);
    const dryThrough = await reprocessDeadLetters(d.clients, deployment, { definition: ratio, config: d.config, dryRun: true });
    expect([dryThrough.wouldRedrive, dryThrough.resultRows, dryThrough.notFromSource]).toEqual([1, 1, 0]);

    // Through the query: only the source record runs (and fails again, under its re-drive's partition).
    const through = await reprocessDeadLetters(d.clients, deployment, { definition: ratio, config: d.config });
    expect([through.reprocessed, through.resultRows]).toEqual([1, 1]);
    expect(through.runs.map((r) => [r.partitionId.split('@')[0], r.records])).toEqual([['shardId-000000000000', 1]]);
    const after = await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix);
    const rerun = after.filter((l) => !letters.some((o) => o.shardId === l.shardId && o.sequenceNumber === l.sequenceNumber));
    expect(rerun.map((l) => Buffer.from(l.dataBase64, 'base64').toString())).toEqual([Buffer.from(sourceRecord[0]!.dataBase64, 'base64').toString()]);
    expect(await sinkRows(d)).toEqual(sinkBefore);

    // Into the stream afterwards: the source record is in the ledger, the result row left; the stream is unchanged.
    const into = await redriveDeadLetters(d.clients, deployment);
    expect([into.redriven.length, into.resultRows]).toEqual([0, 1]);
    expect(await sourceRecords(d)).toEqual(events);
    expect(await sinkRows(d)).toEqual(sinkBefore);
  });

  it('into the stream first: only the source record goes back into the source stream; the query run after it leaves the result row', async () => {
    const d = await deploy(emulators, ratio, 1);
    const events = await runWithRaisingRow(d);
    const sinkBefore = await sinkRows(d);
    const deployment = { ...d.config, sluiceQuery: ratio.name };
    const into = await redriveDeadLetters(d.clients, deployment);
    expect(await sourceRecords(d)).toEqual([...events, events[3]]);
    expect([into.redriven.length, into.resultRows]).toEqual([1, 1]);
    const through = await reprocessDeadLetters(d.clients, deployment, { definition: ratio, config: d.config });
    expect(await sinkRows(d)).toEqual(sinkBefore);
    expect([through.runs.length, through.reprocessed, through.resultRows]).toEqual([0, 0, 1]);

    // The operator is told what the letter is and where to look.
    const descriptorFile = join(dir, 'deployment.json');
    writeFileSync(descriptorFile, JSON.stringify(deployment));
    const cli = await runSluice(['redrive', ratio.name, '--into-stream', '--dry-run', '--deployment', descriptorFile,
      '--endpoint', `kinesis=${emulators.endpoints.kinesis}`, '--endpoint', `dynamodb=${emulators.endpoints.dynamodb}`,
      '--endpoint', `s3=${emulators.endpoints.s3}`], 120_000, emulatorCliEnv(emulators));
    expect([cli.code, cli.stderr]).toEqual([0, '']);
    expect(cli.stdout).toContain('would re-drive 0 record(s)');
    expect(cli.stdout).toContain('result rows (left, not source records): 1');
    expect(cli.stdout).toContain(`an output row of the query that the sink refused or whose expression raised over state; its batch was committed without it. Inspect it under s3://${d.config.deadLetterBucket}/`);
    expect(await sourceRecords(d)).toEqual([...events, events[3]]);
  });
});
