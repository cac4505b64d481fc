/** `sluice status`, `sluice progress` and `sluice state`: read-only views of a deployed query. */
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { type Command, Option } from 'commander';
import { checkpointOf, inspectQuery, label, listPartitions, readCommittedState, type StateRow } from '../../lib/aws/query-inspection.js';
import { describeLostSenderRecords } from '../../lib/aws/expired-internal-records.js';
import type { StreamingQueryProgress } from '../../lib/runtime/progress.js';
import { stringifyWithLongs } from '../../lib/core/long.js';
import { addAwsOptions, connect, EXIT, formatTime, positiveInt, print, table, type AwsOptions } from './common.js';

export function registerInspectCommands(program: Command): void {
  addAwsOptions(program
    .command('status')
    .description('how a deployed query is doing, per shard and stage: last committed batch, watermark, idle, lag, last batch, '
      + 'dead letters, skipped batches; exit code 1 when unhealthy')
    .argument('<query>', 'the query\'s name (its definition\'s `name`)')
    .option('--max-lag <seconds>', 'a shard further behind than this is unhealthy', positiveInt('--max-lag'), 600))
    .action(async (query: string, opts: AwsOptions & { maxLag: number }) => {
      const c = await connect(query, opts);
      try {
        const status = await inspectQuery(c.clients, c.deployment, { sqs: c.sqs, maxLagMs: opts.maxLag * 1000 });
        print(opts, status, () => [
          `query ${status.query}: ${status.healthy ? 'healthy' : 'UNHEALTHY'}`,
          ...status.problems.map((p) => `  - ${p}`),
          table(['shard', 'committed', 'pending', 'watermark', 'idle', 'lag (records)', 'lag (s)', 'last batch', 'dead letters'],
            status.partitions.map((p) => [
              label(p), p.lastCommittedBatch === null ? '-' : String(p.lastCommittedBatch), p.pendingBatch === null ? '-' : String(p.pendingBatch),
              formatTime(p.watermarkMs), p.closed ? 'closed' : p.idle ? 'yes' : 'no',
              p.lag ? `${p.lag.records}${p.lag.capped ? '+' : ''}` : '-', p.lag ? (p.lag.ms / 1000).toFixed(1) : '-',
              p.lastProgress ? describeProgress(p.lastProgress) : '-', String(p.deadLetters),
            ])),
          `dead letters: ${status.deadLetters} (s3://${c.deployment.deadLetterBucket}/${c.deployment.deadLetterPrefix ?? 'dead-letter/'}${status.query}/)`,
          `skipped batches in the on-failure queue (not yet recorded): ${status.skippedBatches ?? 'unknown (no queue in the deployment)'}`,
          `skipped ranges waiting for a re-drive: ${status.skippedRanges.length}`,
          ...status.skippedRanges.map((r) => `  ${r.partitionId} ${r.firstSequenceNumber}..${r.lastSequenceNumber} (${r.batchSize} record(s), `
            + `skipped ${formatTime(r.skippedAtMs)}): ${r.reason}`),
          ...(status.lostRanges.length > 0 ? [`skipped ranges whose records expired before the re-drive (lost): ${status.lostRanges.length}`] : []),
          ...status.lostRanges.map((r) => `  ${r.partitionId} ${r.outcome!.expiredRange?.first ?? r.firstSequenceNumber}..${r.outcome!.expiredRange?.last ?? r.lastSequenceNumber}`
            + ` (${r.outcome!.expired} record(s) lost)${r.acknowledgement
              ? `; acknowledged by ${r.acknowledgement.by} at ${formatTime(r.acknowledgement.atMs)}: ${r.acknowledgement.reason}` : ''}`
            + (r.lostSources ?? []).map((l) => `\n    rows lost: ${describeLostSenderRecords(l)}`).join('')),
        ].join('\n'));
        process.exitCode = status.healthy ? EXIT.ok : EXIT.unhealthy;
      } finally {
        c.close();
      }
    });

  addAwsOptions(program
    .command('progress')
    .description('the recent progress records of a deployed query (Spark\'s StreamingQueryProgress), oldest first, from the checkpoint table')
    .argument('<query>', 'the query\'s name')
    .option('--shard <id>', 'only this shard (a stage-2 partition is state.<shard>)')
    .option('--follow', 'keep printing new records as batches commit (Ctrl-C, --max or --timeout stops)')
    .option('--interval <seconds>', 'how often --follow polls', positiveInt('--interval'), 2)
    .option('--max <n>', 'stop after printing this many records', positiveInt('--max'))
    .option('--timeout <seconds>', 'with --follow: stop after this long', positiveInt('--timeout')))
    .action(async (query: string, opts: AwsOptions & { shard?: string; follow?: boolean; interval: number; max?: number; timeout?: number }) => {
      const c = await connect(query, opts);
      const seen = new Set<string>();
      const stop = { now: false };
      let printed = 0;
      // SIGINT ends the wait at once; the records of the current poll are still printed.
      let wake = (): void => {};
      const onSignal = (): void => { stop.now = true; wake(); };
      const deadline = opts.timeout === undefined ? Infinity : Date.now() + opts.timeout * 1000;
      process.once('SIGINT', onSignal);
      try {
        for (;;) {
          const { ids } = await listPartitions(c.clients, c.deployment);
          const records: { partitionId: string; progress: StreamingQueryProgress }[] = [];
          for (const partitionId of ids.filter((id) => !opts.shard || id === opts.shard)) {
            for (const progress of await checkpointOf(c.clients, c.deployment, partitionId).readRecentProgress<StreamingQueryProgress>()) {
              const key = `${partitionId}/${progress.batchId}/${progress.runId}`;
              if (seen.has(key)) continue;
              seen.add(key);
              records.push({ partitionId, progress });
            }
          }
          records.sort((a, b) => a.progress.timestamp.localeCompare(b.progress.timestamp));
          for (const r of records.slice(0, opts.max === undefined ? undefined : opts.max - printed)) {
            process.stdout.write(opts.json
              ? `${JSON.stringify({ partitionId: r.partitionId, ...r.progress })}\n`
              : `${r.partitionId}  ${describeProgress(r.progress)}\n`);
            printed++;
          }
          if (!opts.follow || stop.now || printed === opts.max) break;
          const waitMs = Math.min(opts.interval * 1000, deadline - Date.now());
          if (waitMs <= 0) break;
          await new Promise<void>((r) => { const timer = setTimeout(r, waitMs); wake = () => { clearTimeout(timer); r(); }; });
          if (stop.now) break;
        }
      } finally {
        process.off('SIGINT', onSignal);
        c.close();
      }
    });

  addAwsOptions(program
    .command('state')
    .description('the operator state of a deployed query at its committed version, as rows (read-only)')
    .argument('<query>', 'the query\'s name')
    .addOption(new Option('--operator <id>', 'only this stateful operator').argParser((v) => {
      if (!/^\d+$/.test(v)) throw new Error('--operator must be an operator id (a number; `sluice explain` shows them).');
      return Number(v);
    }))
    .option('--key <value...>', 'only rows whose key (or a value of its key columns) equals one of these')
    .option('--export <file>', 'write every row as JSON Lines to this file instead of printing it'))
    .action(async (query: string, opts: AwsOptions & { operator?: number; key?: string[]; export?: string }) => {
      const c = await connect(query, opts);
      const out = opts.export ? createWriteStream(opts.export) : null;
      let rows = 0;
      try {
        for await (const row of readCommittedState(c.clients, c.deployment, { operatorId: opts.operator })) {
          if (opts.key && !keyMatches(row, opts.key)) continue;
          rows++;
          const line = stringifyWithLongs(row);
          if (out) {
            if (!out.write(`${line}\n`)) await once(out, 'drain');
          } else {
            process.stdout.write(opts.json ? `${line}\n` : `${row.partitionId}  op ${row.operatorId}/${row.storeName}  ${stringifyWithLongs(row.key)} → ${stringifyWithLongs(row.value)}\n`);
          }
        }
      } finally {
        if (out) { out.end(); await once(out, 'finish'); }
        c.close();
      }
      if (out) process.stderr.write(`${rows} state rows written to ${opts.export}\n`);
    });
}

function keyMatches(row: StateRow, wanted: readonly string[]): boolean {
  const parts = Array.isArray(row.key) ? row.key : [row.key];
  const texts = [stringifyWithLongs(row.key), ...parts.map((p) => (typeof p === 'string' ? p : stringifyWithLongs(p)))];
  return wanted.some((w) => texts.includes(w));
}

export function describeProgress(p: StreamingQueryProgress): string {
  const state = p.stateOperators.map((s) => `${s.numRowsTotal} state rows`).join(', ');
  return `batch ${p.batchId} at ${p.timestamp}: ${p.numInputRows} in, ${p.sink.numOutputRows} out, ${p.batchDuration} ms`
    + `${p.eventTime.watermark ? `, watermark ${p.eventTime.watermark}` : ''}${state ? `, ${state}` : ''}`
    + `${p.numDeadLetteredRows ? `, ${p.numDeadLetteredRows} dead-lettered` : ''}`;
}
