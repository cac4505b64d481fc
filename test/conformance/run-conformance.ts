/**
 * `npm run conformance -- [options] <dir>`: runs every *.json scenario in <dir> under each state
 * mode (./state-modes.ts), one line per scenario and mode (`PASS id` / `FAIL id: reason`), then per
 * mode `<mode>: N passed, N failed (T s)`; exits non-zero if any mode has a failure.
 *
 * Options: `--mode own-table|key-value` runs one mode only; `--dynamodb-local` runs key-value mode
 * against DynamoDB Local (started here, or AWS_ENDPOINT_URL) instead of the in-memory item table.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { runScenario } from './scenario-runner.js';
import { keyValueMode, ownTableMode, STATE_MODES, type KeyValueBackend, type StateMode, type StateModeName } from './state-modes.js';

interface Options {
  readonly dir: string;
  readonly modes: readonly StateModeName[];
  readonly dynamodbLocal: boolean;
}

function parseArgs(argv: readonly string[]): Options {
  const args = argv.filter((a) => a !== '--');
  let dir: string | undefined;
  let modes: readonly StateModeName[] = STATE_MODES;
  let dynamodbLocal = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--dynamodb-local') dynamodbLocal = true;
    else if (a === '--mode') {
      const m = args[++i];
      if (!STATE_MODES.includes(m as StateModeName)) throw new Error(`--mode takes one of ${STATE_MODES.join(', ')}; got ${m}`);
      modes = [m as StateModeName];
    } else if (a.startsWith('--')) throw new Error(`unknown option ${a} (options: --mode <${STATE_MODES.join('|')}>, --dynamodb-local)`);
    else dir = a;
  }
  return { dir: dir ?? '../shared/conformance/scenarios', modes, dynamodbLocal };
}

/** DynamoDB Local with the state table, and how to stop it. */
async function dynamodbLocalBackend(): Promise<KeyValueBackend & { close(): Promise<void> }> {
  const { startEmulators } = await import('../../lib/local/emulators.js');
  const { createAwsClients } = await import('../../lib/aws/clients.js');
  const { ensureTables } = await import('../../lib/aws/tables.js');
  const emu = await startEmulators({ kinesis: false, s3: false });
  const aws = createAwsClients(emu.clientOptions);
  const table = 'sluice-conformance-state';
  await ensureTables(aws.dynamodb, { checkpointTable: 'sluice-conformance-checkpoint', stateTable: table });
  return {
    client: aws.dynamodb, table,
    close: async () => {
      aws.destroy();
      await emu.stop();
    },
  };
}

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2));
  const files = statSync(options.dir).isDirectory()
    ? readdirSync(options.dir).filter((f) => f.endsWith('.json')).sort().map((f) => join(options.dir, f))
    : [options.dir];
  const scenarios = files.map((file) => JSON.parse(readFileSync(file, 'utf8')));
  const backend = options.dynamodbLocal && options.modes.includes('key-value') ? await dynamodbLocalBackend() : undefined;
  const summaries: string[] = [];
  let anyFailed = false;
  try {
    for (const modeName of options.modes) {
      const label = modeName === 'key-value' && backend ? 'key-value (DynamoDB Local)' : modeName;
      const started = performance.now();
      let passed = 0;
      let failed = 0;
      for (const scenario of scenarios) {
        // A fresh mode per scenario: its own item table (or query names), nothing shared.
        const mode: StateMode = modeName === 'own-table' ? ownTableMode : keyValueMode(backend);
        const result = await runScenario(scenario, mode);
        if (result.passed) {
          passed++;
          console.log(`PASS [${modeName}] ${result.id}`);
        } else {
          failed++;
          console.log(`FAIL [${modeName}] ${result.id}: ${result.reason}`);
        }
      }
      anyFailed ||= failed > 0;
      summaries.push(`${label}: ${passed} passed, ${failed} failed (${((performance.now() - started) / 1000).toFixed(1)} s)`);
    }
  } finally {
    await backend?.close();
  }
  for (const s of summaries) console.log(s);
  process.exitCode = anyFailed ? 1 : 0;
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 2;
});
