import { runSql } from './sql-query.js';
import type { StructField } from '../plan/data-types.js';
import { toSchema, type SchemaLike } from './schema.js';
import { newAttribute } from '../plan/attribute.js';
import { MemoryStream } from '../sources/memory-stream.js';
import { JsonMemoryStream, type JsonMemoryStreamOptions } from '../sources/json-memory-stream.js';
import type { MicroBatchStream } from '../sources/source.js';
import { DataFrame } from './data-frame.js';
import { UdfRegistration } from './udf-registration.js';
import { DataFrameReader } from './data-frame-reader.js';
import type { StaticStorage } from '../sources/static-storage.js';

export { toSchema, type SchemaLike } from './schema.js';

/**
 * The entry point, like SparkSession: holds the SQL conf (`spark.sql.*` keys keep Spark's names)
 * and creates DataFrames over streams and static data.
 */
export class SluiceSession {
  readonly conf: Map<string, string>;
  /** Registers UDFs by name for SQL text (one table per process, see function-catalog/user-functions.ts). */
  readonly udf = new UdfRegistration();

  /** `storage`: where `read` finds S3 objects and DynamoDB tables (lib/aws's awsStaticStorage); local files need none. */
  constructor(conf: Record<string, string> = {}, private readonly options: { readonly storage?: StaticStorage } = {}) {
    this.conf = new Map(Object.entries(conf));
  }

  /** Static DataFrames from files, S3 and DynamoDB: `await session.read.json('s3://bucket/prefix')`. */
  get read(): DataFrameReader {
    return new DataFrameReader(this, this.options.storage ?? null);
  }

  /** A streaming DataFrame over any micro-batch source; the source's name is its id in the plan. */
  readStream(source: MicroBatchStream): DataFrame {
    return new DataFrame(this, this.streamingRelation(source.name, source.schema).plan, new Map([[source.name, source]]));
  }

  /**
   * A streaming DataFrame over a source known only by id and schema: enough to analyse a query.
   * A run binds the id to a live source (a deployed query binds each invocation's shard).
   */
  streamingRelation(sourceId: string, schema: readonly StructField[]): DataFrame {
    return new DataFrame(this, {
      kind: 'StreamingRelation',
      sourceId,
      schema,
      output: schema.map((f) => newAttribute(f.name, f.type)),
    });
  }

  memoryStream(schema: SchemaLike, name?: string): { stream: MemoryStream; df: DataFrame } {
    const stream = new MemoryStream(toSchema(schema), name);
    return { stream, df: this.readStream(stream) };
  }

  /** A stream of raw JSON records, decoded with `schema` as the Kinesis source decodes them. */
  jsonMemoryStream(schema: SchemaLike, options: JsonMemoryStreamOptions = {}): { stream: JsonMemoryStream; df: DataFrame } {
    const stream = new JsonMemoryStream(toSchema(schema), options);
    return { stream, df: this.readStream(stream) };
  }

  /** Temp views by lower-cased name (DataFrame.createOrReplaceTempView). */
  readonly tempViews = new Map<string, DataFrame>();

  /**
   * Runs a SELECT over temp views: `sql('SELECT user, count(*) AS n FROM events GROUP BY user')`.
   * The result is a DataFrame like any other (streaming when a view is); see docs/sql.md.
   */
  sql(query: string): DataFrame {
    return runSql(query, this.tempViews);
  }

  /** The temp view registered under `name` (Spark's `spark.table`). */
  table(name: string): DataFrame {
    return runSql(`SELECT * FROM ${name.split('.').map((p) => `\`${p.replace(/`/g, '``')}\``).join('.')}`, this.tempViews);
  }

  /** Drops a temp view; true if it existed (Spark's `spark.catalog.dropTempView`). */
  dropTempView(name: string): boolean {
    return this.tempViews.delete(name.toLowerCase());
  }

  /** A static (batch) DataFrame; rows are positional arrays in schema order. */
  createDataFrame(rows: readonly (readonly unknown[])[], schema: SchemaLike, name = 'LocalRelation'): DataFrame {
    const fields = toSchema(schema);
    return new DataFrame(this, {
      kind: 'LocalRelation',
      name,
      rows,
      output: fields.map((f) => newAttribute(f.name, f.type)),
    });
  }
}
