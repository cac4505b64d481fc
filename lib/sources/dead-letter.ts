/**
 * Records that cannot become rows (bad JSON, wrong types, a partition key that contradicts the
 * declared one) are not dropped and do not block their shard: they go, with the reason, to a
 * dead-letter location. Writes are idempotent per (shard, sequence number), so a re-run batch
 * rewrites the same entries instead of adding new ones.
 */
export interface DeadLetterRecord {
  readonly queryName: string;
  readonly shardId: string;
  readonly sequenceNumber: string;
  readonly partitionKey: string;
  /** Epoch milliseconds the record reached Kinesis. */
  readonly approximateArrivalTimestampMs: number;
  /** The raw record bytes, base64 (as Kinesis delivers them). */
  readonly dataBase64: string;
  readonly reason: string;
}

/**
 * A result row left out of a batch (the sink refuses it, or an expression over state raises on it)
 * is dead-lettered under a sequence number of this form instead of a Kinesis record's: its data is
 * an output row, not a source record, so no re-drive may put it into the source stream or run it
 * through the query as one, whatever shard it is filed under.
 */
const RESULT_ROW_LETTER_MARK = 'result-batch-';
export const resultRowLetterSequenceNumber = (batchId: number, digest: string): string => `${RESULT_ROW_LETTER_MARK}${batchId}-${digest}`;
export const isResultRowLetter = (letter: Pick<DeadLetterRecord, 'sequenceNumber'>): boolean => letter.sequenceNumber.startsWith(RESULT_ROW_LETTER_MARK);

export interface DeadLetterWriter {
  readonly description: string;
  write(records: readonly DeadLetterRecord[]): Promise<void>;
}

/** Keeps dead letters in memory (tests, local runs without S3). */
export class MemoryDeadLetterWriter implements DeadLetterWriter {
  readonly description = 'MemoryDeadLetterWriter';
  private readonly byId = new Map<string, DeadLetterRecord>();
  async write(records: readonly DeadLetterRecord[]): Promise<void> {
    for (const r of records) this.byId.set(`${r.shardId}/${r.sequenceNumber}`, r);
  }
  get records(): DeadLetterRecord[] {
    return [...this.byId.values()];
  }
}
