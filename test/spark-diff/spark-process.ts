/** One PySpark process (one JVM) for a whole run: cases go in as JSON lines, results come back. */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface, type Interface } from 'node:readline';
import type { DiffCase, EngineResult } from './case-format.js';

export class SparkProcess {
  private readonly lines: AsyncIterator<string>;
  private readonly reader: Interface;
  private stderrTail = '';

  private constructor(private readonly child: ChildProcessWithoutNullStreams) {
    this.reader = createInterface({ input: child.stdout });
    this.lines = this.reader[Symbol.asyncIterator]();
    child.stderr.on('data', (d: Buffer) => {
      this.stderrTail = (this.stderrTail + d.toString()).slice(-4000);
    });
  }

  static async start(python: string, script: string): Promise<{ spark: SparkProcess; startupSeconds: number; version: string }> {
    const child = spawn(python, [script], { env: { ...process.env, TZ: 'UTC', PYSPARK_PYTHON: python } });
    const spark = new SparkProcess(child);
    const ready = JSON.parse(await spark.expect('@@READY '));
    return { spark, startupSeconds: ready.startupSeconds, version: ready.sparkVersion };
  }

  private async expect(prefix: string): Promise<string> {
    for (;;) {
      const next = await this.lines.next();
      if (next.done) throw new Error(`PySpark exited (code ${this.child.exitCode}); stderr tail:\n${this.stderrTail}`);
      if (next.value.startsWith(prefix)) return next.value.slice(prefix.length);
    }
  }

  async run(c: DiffCase): Promise<EngineResult> {
    this.child.stdin.write(`${JSON.stringify(c)}\n`);
    return JSON.parse(await this.expect('@@RESULT ')) as EngineResult;
  }

  async close(): Promise<void> {
    this.child.stdin.end();
    await new Promise((resolve) => this.child.once('exit', resolve));
  }
}
