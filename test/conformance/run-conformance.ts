/**
 * `npm run conformance -- <dir>`: runs every *.json scenario in <dir>, one line each
 * (`PASS id` / `FAIL id: reason`), then `N passed, N failed`; exits non-zero on any failure.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { runScenario } from './scenario-runner.js';

async function main(): Promise<void> {
  const args = process.argv.slice(2).filter((a) => a !== '--');
  const dir = args[0] ?? '../shared/conformance/scenarios';
  const files = statSync(dir).isDirectory()
    ? readdirSync(dir).filter((f) => f.endsWith('.json')).sort().map((f) => join(dir, f))
    : [dir];
  let passed = 0;
  let failed = 0;
  for (const file of files) {
    const scenario = JSON.parse(readFileSync(file, 'utf8'));
    const result = await runScenario(scenario);
    if (result.passed) {
      passed++;
      console.log(`PASS ${result.id}`);
    } else {
      failed++;
      console.log(`FAIL ${result.id}: ${result.reason}`);
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exitCode = failed > 0 ? 1 : 0;
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 2;
});
