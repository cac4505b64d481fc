/**
 * The files sink's options against the query's result, at definition (and so at `cdk synth`):
 * `partitionBy` names result columns of a type that can name a folder, and Parquet can hold every
 * column (Spark refuses void and interval columns in Parquet, too).
 */
import { AnalysisError } from '../errors/sluice-error.js';
import type { StructField } from '../plan/data-types.js';
import { resolvePartitionColumns } from '../sinks/partition-path.js';
import { unwritableParquetType } from '../sinks/parquet-format.js';
import type { StreamingQueryDefinition } from './query-definition.js';

export function checkFilesSink(definition: StreamingQueryDefinition, schema: readonly StructField[]): void {
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
