/**
 * SluiceLakeTable: a Glue Data Catalog table over an s3-files sink's location, so Athena (and Spark
 * or Trino on the Glue catalog) query the committed output with SQL. Columns come from the query's
 * result schema (validated at synth); partition columns are Glue partition keys with partition
 * projection, so no crawler and no `MSCK REPAIR` is needed: Athena computes a partition's location
 * from `storage.location.template`.
 *
 * Projection is `injected` by default (works for any value; a query must then filter each partition
 * column with `=` or `IN`); pass `projection` to give a column a range instead, e.g. a date column:
 * `{ dt: { type: 'date', format: 'yyyy-MM-dd', range: '2026-01-01,NOW' } }`. Athena substitutes values
 * into the template unescaped, so a value Hive escapes in its folder name (`/`, `=`, `:` ...) is found
 * only when the query names it escaped.
 *
 * The sink's own folders (`_sluice_metadata`, `_sluice_staging`, `_sluice_rejected`) start with `_`,
 * which Athena skips; with partition keys they are outside every partition's location anyway.
 */
import { Stack } from 'aws-cdk-lib';
import * as glue from 'aws-cdk-lib/aws-glue';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import type { LakeTableShape } from '../lib/query/validate-query.js';

/** One partition column's projection (Athena's `projection.<column>.*` table properties, without the prefix). */
export type LakeProjection = Readonly<Record<string, string>> & { readonly type: string };

export interface LakeTableOptions {
  /** Glue database to create the table in; created when `createDatabase` is true (default: created, named after the query). */
  readonly databaseName?: string;
  readonly createDatabase?: boolean;
  /** Table name (default: the query name, lower case, `-` and `.` as `_`). */
  readonly tableName?: string;
  /** Projection per partition column (default `{ type: 'injected' }`). */
  readonly projection?: Readonly<Record<string, LakeProjection>>;
}

export interface SluiceLakeTableProps extends LakeTableOptions {
  readonly queryName: string;
  readonly shape: LakeTableShape;
  readonly bucket: s3.IBucket;
  /** The sink prefix, ending in `/`. */
  readonly prefix: string;
}

const FORMATS = {
  parquet: {
    inputFormat: 'org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat',
    outputFormat: 'org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat',
    serde: 'org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe',
    parameters: {},
  },
  jsonl: {
    inputFormat: 'org.apache.hadoop.mapred.TextInputFormat',
    outputFormat: 'org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat',
    serde: 'org.openx.data.jsonserde.JsonSerDe',
    // The sink writes ISO-8601 timestamps with a `Z`.
    parameters: { 'timestamp.formats': "yyyy-MM-dd'T'HH:mm:ss.SSSSSSX,yyyy-MM-dd'T'HH:mm:ssX" },
  },
} as const;

/** A catalog name: lower case, letters, digits and `_`. */
export function catalogName(name: string): string {
  return name.toLowerCase().replace(/[^a-z0-9_]/g, '_');
}

export class SluiceLakeTable extends Construct {
  public readonly databaseName: string;
  public readonly tableName: string;
  public readonly location: string;
  private readonly bucket: s3.IBucket;
  private readonly prefix: string;
  private readonly table: glue.CfnTable;

  constructor(scope: Construct, id: string, props: SluiceLakeTableProps) {
    super(scope, id);
    this.bucket = props.bucket;
    this.prefix = props.prefix;
    this.databaseName = props.databaseName ?? catalogName(props.queryName);
    this.tableName = props.tableName ?? catalogName(props.queryName);
    this.location = `s3://${props.bucket.bucketName}/${props.prefix}`;
    const account = Stack.of(this).account;
    let database: glue.CfnDatabase | undefined;
    if (props.createDatabase ?? props.databaseName === undefined) {
      database = new glue.CfnDatabase(this, 'Database', { catalogId: account, databaseInput: { name: this.databaseName } });
    }
    const format = FORMATS[props.shape.format];
    const keys = props.shape.partitionKeys;
    const unknown = Object.keys(props.projection ?? {}).filter((c) => !keys.some((k) => k.name === c));
    if (unknown.length > 0) {
      throw new Error(`lakeTable.projection names ${unknown.join(', ')}, which the sink does not partition by (partitionBy: [${keys.map((k) => k.name).join(', ')}]).`);
    }
    const projection: Record<string, string> = {};
    if (keys.length > 0) {
      projection['projection.enabled'] = 'true';
      projection['storage.location.template'] = `${this.location}${keys.map((k) => `${k.name}=\${${k.name}}`).join('/')}/`;
      for (const key of keys) {
        for (const [name, value] of Object.entries(props.projection?.[key.name] ?? { type: 'injected' })) {
          projection[`projection.${key.name}.${name}`] = value;
        }
      }
    }
    this.table = new glue.CfnTable(this, 'Table', {
      catalogId: account,
      databaseName: this.databaseName,
      tableInput: {
        name: this.tableName,
        tableType: 'EXTERNAL_TABLE',
        parameters: { EXTERNAL: 'TRUE', classification: props.shape.format === 'parquet' ? 'parquet' : 'json', ...projection },
        partitionKeys: keys.map((k) => ({ name: k.name, type: k.type })),
        storageDescriptor: {
          location: this.location,
          columns: props.shape.columns.map((c) => ({ name: c.name, type: c.type })),
          inputFormat: format.inputFormat,
          outputFormat: format.outputFormat,
          serdeInfo: { serializationLibrary: format.serde, parameters: { ...format.parameters } },
        },
      },
    });
    if (database) this.table.addDependency(database);
  }

  /** Lets `grantee` read the table through the catalog (Athena, Spark on Glue) and its committed files. */
  grantRead(grantee: iam.IGrantable): iam.Grant {
    const stack = Stack.of(this);
    const catalog = `arn:${stack.partition}:glue:${stack.region}:${stack.account}`;
    const grant = iam.Grant.addToPrincipal({
      grantee,
      actions: ['glue:GetDatabase', 'glue:GetTable', 'glue:GetTables', 'glue:GetPartition', 'glue:GetPartitions'],
      resourceArns: [`${catalog}:catalog`, `${catalog}:database/${this.databaseName}`, `${catalog}:table/${this.databaseName}/${this.tableName}`],
    });
    this.bucket.grantRead(grantee, `${this.prefix}*`);
    return grant;
  }

  /** What a user types in Athena to read the table. */
  athenaQuery(): string {
    return `SELECT * FROM "${this.databaseName}"."${this.tableName}" LIMIT 10;`;
  }
}

/** SluiceQuery's hook: the table when `option` asks for one, refused for a sink other than s3-files. */
export function createLakeTable(
  scope: Construct, option: boolean | LakeTableOptions | undefined, shape: LakeTableShape | null, queryName: string,
  bucket: s3.IBucket | undefined, prefix: string | undefined, propError: (message: string) => Error,
): SluiceLakeTable | undefined {
  if (option === undefined || option === false) return undefined;
  if (!shape || !bucket || prefix === undefined) {
    throw propError(`lakeTable is for the s3-files sink; query '${queryName}' writes to another sink.`);
  }
  return new SluiceLakeTable(scope, 'LakeTable', { ...(option === true ? {} : option), queryName, shape, bucket, prefix });
}
