/** Runs the `sluice` command as a user does (`node --import tsx bin/sluice.ts ...`), for end-to-end tests. */
import { spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import type { EmulatorSet } from '../../lib/local/emulators.js';

/** The emulators' credentials and region as the CLI's environment (the default credential chain reads them). */
export function emulatorCliEnv(emulators: EmulatorSet): Record<string, string> {
  const { credentials, region } = emulators.clientOptions;
  return { AWS_ACCESS_KEY_ID: credentials!.accessKeyId, AWS_SECRET_ACCESS_KEY: credentials!.secretAccessKey, AWS_REGION: region! };
}

export const PROJECT_ROOT = resolve(import.meta.dirname, '../..');

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Its exit code and output; fails (and interrupts it) if it runs longer than `timeoutMs`. */
export function runSluice(args: string[], timeoutMs: number, env: Readonly<Record<string, string>> = {}): Promise<CliResult> {
  return new Promise((done, fail) => {
    // From the TypeScript sources, as `npm run dev` does (`sluice` resolves to them: the sluice-source condition).
    const child = spawn(process.execPath, ['--conditions=sluice-source', '--import', 'tsx', join(PROJECT_ROOT, 'bin/sluice.ts'), ...args], { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => { stdout += c.toString(); });
    child.stderr.on('data', (c: Buffer) => { stderr += c.toString(); });
    const timer = setTimeout(() => { child.kill('SIGINT'); fail(new Error(`sluice ${args[0]} did not finish in ${timeoutMs} ms:\n${stdout}\n${stderr}`)); }, timeoutMs);
    child.on('exit', (code) => { clearTimeout(timer); done({ code, stdout, stderr }); });
  });
}
