import { AnalysisError } from '../../errors/sluice-error.js';
import { typeToString, type DataType } from '../data-types.js';

/** Spark's DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE for argument `index` (0-based) of `fn`. */
export function argumentTypeError(fn: string, index: number, actual: DataType, required: string): AnalysisError {
  return new AnalysisError(
    `[DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE] Cannot resolve "${fn}(...)" due to data type mismatch: ` +
      `The ${ordinalWord(index + 1)} parameter requires the ${required} type, however it has the type "${typeToString(actual).toUpperCase()}".`,
    { code: 'DATATYPE_MISMATCH', errorClass: 'DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE' },
  );
}

/** Spark's WRONG_NUM_ARGS.WITHOUT_SUGGESTION. */
export function wrongNumberOfArguments(fn: string, minArgs: number, maxArgs: number, actual: number): AnalysisError {
  const expected = minArgs === maxArgs ? `${minArgs}` : maxArgs === Infinity ? `> ${minArgs - 1}` : `[${Array.from({ length: maxArgs - minArgs + 1 }, (_, i) => minArgs + i).join(', ')}]`;
  return new AnalysisError(
    `[WRONG_NUM_ARGS.WITHOUT_SUGGESTION] The \`${fn}\` requires ${expected} parameters but the actual number is ${actual}.`,
    { code: 'WRONG_NUM_ARGS', errorClass: 'WRONG_NUM_ARGS.WITHOUT_SUGGESTION' },
  );
}

function ordinalWord(n: number): string {
  return ['zeroth', 'first', 'second', 'third', 'fourth', 'fifth', 'sixth', 'seventh', 'eighth', 'ninth', 'tenth'][n] ?? `${n}th`;
}
