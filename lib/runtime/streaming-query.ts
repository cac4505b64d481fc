import type { Clock } from './clock.js';
import type { StreamingQueryProgress } from './progress.js';
import type { StreamExecution } from './stream-execution.js';
import type { Trigger } from './trigger.js';

/**
 * The handle `writeStream.start()` returns (Spark's StreamingQuery). Triggers are serialised: a
 * background loop (when started with `background`) and explicit calls such as
 * `processAllAvailable()` never run two batches at once.
 */
export class StreamingQuery {
  private chain: Promise<unknown> = Promise.resolve();
  private active = true;
  private failure: Error | null = null;
  private nextTriggerTimeMs: number;
  private batchesThisRun = 0;
  private loop: NodeJS.Timeout | null = null;
  private terminationWaiters: (() => void)[] = [];

  constructor(
    private readonly execution: StreamExecution,
    private readonly trigger: Trigger,
    private readonly clock: Clock,
    readonly name: string | null,
  ) {
    this.nextTriggerTimeMs = clock.nowMs();
  }

  get id(): string {
    return this.execution.id;
  }
  get runId(): string {
    return this.execution.runId;
  }
  get isActive(): boolean {
    return this.active;
  }
  get exception(): Error | null {
    return this.failure;
  }
  get lastProgress(): StreamingQueryProgress | undefined {
    return this.execution.lastProgress;
  }
  get recentProgress(): readonly StreamingQueryProgress[] {
    return this.execution.recentProgress;
  }

  private serialize<T>(work: () => Promise<T>): Promise<T> {
    const run = this.chain.then(work, work);
    this.chain = run.catch(() => undefined);
    return run;
  }

  private async trigger1(): Promise<boolean> {
    if (!this.active) return false;
    try {
      const ran = await this.execution.runOneTrigger();
      if (ran) this.batchesThisRun++;
      return ran;
    } catch (error) {
      this.fail(error as Error);
      throw error;
    }
  }

  private fail(error: Error): void {
    this.failure = error;
    this.terminate();
  }

  private terminate(): void {
    this.active = false;
    if (this.loop) clearTimeout(this.loop);
    this.loop = null;
    this.terminationWaiters.splice(0).forEach((w) => w());
  }

  /**
   * Runs batches until everything available is processed, including the no-data batches that the
   * new watermark makes necessary. With `once` it runs at most one batch per start; with
   * `availableNow` it stops the query when done.
   */
  processAllAvailable(): Promise<void> {
    return this.serialize(async () => {
      if (this.trigger.kind === 'once') {
        if (this.batchesThisRun === 0) await this.trigger1();
        this.terminate();
        return;
      }
      while (await this.trigger1()) { /* next batch */ }
      if (this.trigger.kind === 'availableNow') this.terminate();
    });
  }

  /**
   * For a processing-time trigger on a manual clock: runs the triggers that are due at the current
   * clock time, one batch each, as Spark's ProcessingTimeExecutor would.
   */
  runDueTriggers(): Promise<number> {
    return this.serialize(async () => {
      let ran = 0;
      const intervalMs = this.trigger.kind === 'processingTime' ? this.trigger.intervalMs : 0;
      if (intervalMs === 0) {
        while (await this.trigger1()) ran++;
        return ran;
      }
      while (this.active && this.clock.nowMs() >= this.nextTriggerTimeMs) {
        const now = this.clock.nowMs();
        if (await this.trigger1()) ran++;
        this.nextTriggerTimeMs = Math.floor(now / intervalMs) * intervalMs + intervalMs;
      }
      return ran;
    });
  }

  /** Keeps triggering in the background on the real clock until stopped or failed. */
  runInBackground(pollMs = 100): void {
    const intervalMs = this.trigger.kind === 'processingTime' ? this.trigger.intervalMs : 0;
    const tick = (): void => {
      if (!this.active) return;
      this.serialize(async () => {
        if (this.trigger.kind !== 'processingTime') {
          await this.processAllAvailableUnlocked();
          return;
        }
        await this.trigger1();
      }).then(
        () => {
          if (this.active) this.loop = setTimeout(tick, Math.max(intervalMs, pollMs));
        },
        () => undefined,
      );
    };
    tick();
  }

  private async processAllAvailableUnlocked(): Promise<void> {
    while (await this.trigger1()) { /* drain */ }
    this.terminate();
  }

  /** Resolves when the query stops; rejects with its failure if it failed. */
  awaitTermination(): Promise<void> {
    if (!this.active) return this.failure ? Promise.reject(this.failure) : Promise.resolve();
    return new Promise((resolve, reject) => {
      this.terminationWaiters.push(() => (this.failure ? reject(this.failure) : resolve()));
    });
  }

  /** Stops after the batch in progress, if any. */
  async stop(): Promise<void> {
    await this.serialize(async () => this.terminate());
  }

  explain(): string {
    return `query ${this.name ?? this.id}`;
  }
}
