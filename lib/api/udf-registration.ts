import { isBuiltinFunctionName } from '../analysis/binder.js';
import type { DataType } from '../plan/data-types.js';
import { registerUserFunction } from '../plan/function-catalog/index.js';
import { callable, type UserDefinedFunction } from '../plan/udf.js';
import { userFunction, type UserFunction } from '../plan/user-function.js';
import { AnalysisError } from '../errors/sluice-error.js';

/**
 * `session.udf` (Spark's UDFRegistration): registers a function by name for SQL text
 * (`expr('slug(title)')`, `session.sql(...)`), and returns it for the DataFrame API too.
 */
export class UdfRegistration {
  register(name: string, f: UserFunction['fn'] | UserDefinedFunction, returnType?: DataType | string): UserDefinedFunction {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
      throw new AnalysisError(`[INVALID_IDENTIFIER] The identifier ${name} is invalid as a function name.`, {
        code: 'INVALID_UDF_NAME', hint: 'name a UDF with letters, digits and underscores, starting with a letter.',
      });
    }
    const given = 'definition' in f ? f.definition : null;
    if (given && returnType !== undefined) {
      throw new AnalysisError('[CANNOT_REGISTER_UDF_WITH_RETURN_TYPE] Invalid return type: a UDF already has one; pass the function alone.', {
        code: 'UDF_RETURN_TYPE_TWICE', hint: `session.udf.register('${name}', myUdf) for a udf(...), or session.udf.register('${name}', fn, 'string') for a plain function.`,
      });
    }
    if (isBuiltinFunctionName(name)) {
      throw new AnalysisError(`Cannot register a UDF named \`${name}\`: it is a built-in function, which a call by that name always runs.`, {
        code: 'UDF_NAME_IS_BUILTIN', hint: `choose another name, e.g. my_${name.toLowerCase()}.`,
      });
    }
    const definition = given
      ? userFunction(name, given.fn, given.returnType, given.deterministic)
      : userFunction(name, f as UserFunction['fn'], returnType ?? 'string');
    registerUserFunction(definition);
    return callable(definition);
  }
}
