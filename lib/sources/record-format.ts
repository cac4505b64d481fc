/**
 * How a stream's record bytes are laid out, as the record decoder reads it. Declared here, in the
 * sources layer, so decoders import nothing above them: a query definition's source spec has these
 * fields (plus its schema and partition key) and is passed as it is.
 */
export interface RecordFormatOptions {
  /** JSON objects by field name (default), CSV lines in schema order, or the raw UTF-8 string. */
  readonly format?: 'json' | 'csv' | 'raw';
  /** How a JSON number in a timestamp column is read (strings are ISO-8601). Default seconds, as Spark casts. */
  readonly numericTimestamps?: 'seconds' | 'millis' | 'micros';
  /** CSV field separator (default `,`). */
  readonly csvDelimiter?: string;
}

/**
 * A whole source spec may stand for the options: its other fields (the declared schema, which the
 * decoder receives resolved, the partition key) are not read.
 */
export type RecordSourceSpec = RecordFormatOptions & { readonly schema?: unknown };
