/**
 * The files sink's options against the query's result, at definition (and so at `cdk synth`):
 * `partitionBy` names result columns of a type that can name a folder, and Parquet can hold every
 * column (Spark refuses void and interval columns in Parquet, too).
 */
import { AnalysisError } from '../errors/sluice-error.js';
import type { DataType, StructField } from '../plan/data-types.js';
import { resolvePartitionColumns } from '../sinks/partition-path.js';
import { unwritableParquetType } from '../sinks/parquet-format.js';
import type { QueryDefinition } from './query-definition.js';

export function checkFilesSink(definition: QueryDefinition, schema: readonly StructField[]): void {
  const sink = definition.sink;
  if (sink.kind !== 's3-files') return;
  const partitionFields = resolvePartitionColumns(sink.partitionBy ?? [], schema);
  if (sink.format !== 'parquet') return;
  for (const field of schema) {
    if (partitionFields.includes(field)) continue;
    const unwritable = unwritableParquetType(field.type);
    if (unwritable) {
      throw new AnalysisError(`Column '${field.name}' has type ${unwritable}, which Parquet cannot hold.`, {
        code: 'UNSUPPORTED_PARQUET_TYPE', errorClass: 'UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE',
        hint: 'cast the column to a supported type (string, long, double, boolean, timestamp, arrays, structs) or drop it.',
      });
    }
  }
}

/** A Hive/Glue column: the name and the Hive type string Athena reads the data as. */
export interface LakeColumn {
  readonly name: string;
  readonly type: string;
}

/** What a catalog table over the files sink's location needs: the format, data and partition columns. */
export interface LakeTableShape {
  readonly format: 'jsonl' | 'parquet';
  readonly columns: readonly LakeColumn[];
  readonly partitionKeys: readonly LakeColumn[];
}

/** The Hive type Glue and Athena use for an engine type (as Spark's HiveExternalCatalog maps it). */
export function hiveTypeOf(type: DataType): string {
  if (typeof type === 'object' && type.kind === 'array') return `array<${hiveTypeOf(type.element)}>`;
  if (typeof type === 'object' && type.kind === 'struct') return `struct<${type.fields.map((f) => `${f.name}:${hiveTypeOf(f.type)}`).join(',')}>`;
  if (typeof type === 'object' && type.kind === 'decimal') return `decimal(${type.precision},${type.scale})`;
  if (typeof type === 'object' && type.kind === 'map') return `map<${hiveTypeOf(type.key)},${hiveTypeOf(type.value)}>`;
  switch (type) {
    case 'long': return 'bigint';
    case 'int': case 'double': case 'string': case 'boolean': case 'timestamp': case 'date': case 'binary': return type;
    // Only JSON Lines can hold these (Parquet refuses them above): as JSON text.
    default: return 'string';
  }
}

/** The catalog shape of an s3-files sink's output, or null for other sinks. */
export function lakeTableShapeOf(definition: QueryDefinition, schema: readonly StructField[]): LakeTableShape | null {
  const sink = definition.sink;
  if (sink.kind !== 's3-files') return null;
  const partitionFields = resolvePartitionColumns(sink.partitionBy ?? [], schema);
  return {
    format: sink.format ?? 'jsonl',
    columns: schema.filter((f) => !partitionFields.includes(f)).map((f) => ({ name: f.name, type: hiveTypeOf(f.type) })),
    partitionKeys: partitionFields.map((f) => ({ name: f.name, type: hiveTypeOf(f.type) })),
  };
}

/** `explain`'s sink section: where the files go and the SQL that reads them (Athena, through the construct's lakeTable). */
export function explainLakeTable(definition: QueryDefinition, shape: LakeTableShape): string[] {
  const prefix = definition.sink.kind === 's3-files' && definition.sink.prefix !== undefined ? definition.sink.prefix : `${definition.name}/`;
  const folders = shape.partitionKeys.map((k) => `${k.name}=<value>/`).join('');
  const table = definition.name.toLowerCase().replace(/[^a-z0-9_]/g, '_');
  const where = shape.partitionKeys.length > 0 ? ` WHERE ${shape.partitionKeys.map((k) => `${k.name} = '...'`).join(' AND ')}` : '';
  return [
    '== Sink ==',
    `${shape.format === 'parquet' ? 'Parquet (snappy)' : 'JSON Lines'} files, append only: s3://<sink bucket>/${prefix}${folders}part-<shard>-<batch>.${shape.format}`,
    '(files of a batch appear when its checkpoint commit does; _sluice_* folders hold the manifest, staged files and rejected rows)',
    `columns: ${shape.columns.map((c) => `${c.name} ${c.type}`).join(', ')}${shape.partitionKeys.length > 0 ? `; partitioned by ${shape.partitionKeys.map((k) => `${k.name} ${k.type}`).join(', ')}` : ''}`,
    `Athena (SluiceQuery with lakeTable: true): SELECT * FROM "${table}"."${table}"${where} LIMIT 10;`,
    `DuckDB: SELECT * FROM read_${shape.format === 'parquet' ? 'parquet' : 'json'}('s3://<sink bucket>/${prefix}**/*.${shape.format}'${shape.partitionKeys.length > 0 ? ', hive_partitioning = true' : ''});`,
  ];
}
