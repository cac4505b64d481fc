import { AnalysisError } from '../errors/sluice-error.js';
import { newAttribute } from '../plan/attribute.js';
import type { StructField } from '../plan/data-types.js';
import { inferSchema, jsonLinesRecords, parquetRecords, recordsToRows } from '../sources/static-decoding.js';
import { localFileStorage, type StaticStorage, type StoredObject } from '../sources/static-storage.js';
import { DataFrame, type SessionConf } from './data-frame.js';
import { toSchema, type SchemaLike } from './schema.js';

type Records = readonly { readonly record: Record<string, unknown>; readonly where: string }[];

/**
 * `session.read` (Spark's DataFrameReader), for static DataFrames: JSON Lines and Parquet from
 * files or S3 (`s3://bucket/prefix`: every object under it), and a DynamoDB table's items. The
 * data is read when the call resolves (`await`), and the DataFrame holds it: join it with a stream
 * (a stream-static join) or use it in foreachBatch. Without `schema(...)` the schema is inferred
 * as Spark infers JSON (Parquet keeps its columns' order). A record that does not fit fails the
 * read, naming the object and line: nothing is dropped silently.
 */
export class DataFrameReader {
  constructor(
    private readonly session: SessionConf,
    private readonly storage: StaticStorage | null,
    private readonly userSchema: readonly StructField[] | null = null,
  ) {}

  schema(schema: SchemaLike): DataFrameReader {
    return new DataFrameReader(this.session, this.storage, toSchema(schema));
  }

  /** JSON Lines: one object per line. */
  async json(location: string): Promise<DataFrame> {
    return this.frame(location, jsonLinesRecords(await this.objects(location)), 'JSON', false);
  }

  async parquet(location: string): Promise<DataFrame> {
    return this.frame(location, await parquetRecords(await this.objects(location)), 'Parquet', true);
  }

  /** Every item of a DynamoDB table (a Scan): attributes as columns, numbers as long or double. */
  async dynamodb(table: string): Promise<DataFrame> {
    const items = await this.requireStorage(`dynamodb table ${table}`).scanTable(table);
    return this.frame(table, items.map((record, i) => ({ record, where: `${table} item ${i + 1}` })), 'DynamoDB', false);
  }

  private async objects(location: string): Promise<StoredObject[]> {
    const storage = location.startsWith('s3://') ? this.requireStorage(location) : localFileStorage;
    let objects: StoredObject[];
    try {
      objects = await storage.readObjects(location);
    } catch (error) {
      if ((error as { code?: string }).code !== 'ENOENT') throw error;
      objects = [];
    }
    if (objects.length === 0 && this.userSchema === null) {
      throw new AnalysisError(`[PATH_NOT_FOUND] Path does not exist: ${location}. SQLSTATE: 42K03`, {
        code: 'PATH_NOT_FOUND', errorClass: 'PATH_NOT_FOUND', hint: 'check the path (an S3 prefix lists every object under it); give schema(...) to read an empty location as an empty DataFrame.',
      });
    }
    return objects;
  }

  private frame(location: string, records: Records, format: string, keepOrder: boolean): DataFrame {
    const schema = this.userSchema ?? inferSchema(records.map((r) => r.record), keepOrder);
    if (schema.length === 0) {
      throw new AnalysisError(`[UNABLE_TO_INFER_SCHEMA] Unable to infer schema for ${format}. It must be specified manually. SQLSTATE: 42KD9`, {
        code: 'UNABLE_TO_INFER_SCHEMA', errorClass: 'UNABLE_TO_INFER_SCHEMA', hint: `${location} holds no records: give session.read.schema('name type, ...').`,
      });
    }
    return new DataFrame(this.session, {
      kind: 'LocalRelation',
      name: location,
      rows: recordsToRows(records, schema),
      output: schema.map((f) => newAttribute(f.name, f.type)),
    });
  }

  private requireStorage(what: string): StaticStorage {
    if (this.storage) return this.storage;
    throw new AnalysisError(`Cannot read ${what}: the session has no storage for S3 or DynamoDB.`, {
      code: 'NO_STATIC_STORAGE',
      hint: "create the session with one: new SluiceSession({}, { storage: awsStaticStorage(createAwsClients()) }) (from 'sluice/lambda').",
    });
  }
}
