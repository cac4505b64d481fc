import type { ScalarFunctionSignature } from './signature.js';
import { commonType, requireNumeric } from './type-rules.js';

/** Signatures of NULL-handling functions (implementations: lib/execution/functions/null-functions.ts). */
export const NULL_SIGNATURES: readonly ScalarFunctionSignature[] = [
  { name: 'nvl', minArgs: 2, maxArgs: 2, resultType: (args) => commonType('nvl', args.map((a) => a.type)) },
  { name: 'ifnull', minArgs: 2, maxArgs: 2, resultType: (args) => commonType('ifnull', args.map((a) => a.type)) },
  { name: 'nvl2', minArgs: 3, maxArgs: 3, resultType: (args) => commonType('nvl2', [args[1]!.type, args[2]!.type]) },
  {
    name: 'nullif', minArgs: 2, maxArgs: 2,
    resultType: (args) => {
      commonType('nullif', args.map((a) => a.type)); // the two must be comparable
      return args[0]!.type;
    },
  },
  // Column.isin and SQL's IN: the value and the list brought to one type.
  { name: 'in', minArgs: 1, maxArgs: Infinity, resultType: (args) => { commonType('in', args.map((a) => a.type)); return 'boolean'; } },
  { name: 'equal_null', minArgs: 2, maxArgs: 2, resultType: (args) => { commonType('equal_null', args.map((a) => a.type)); return 'boolean'; } },
  { name: 'isnan', minArgs: 1, maxArgs: 1, resultType: (args) => { requireNumeric('isnan', args, 0); return 'boolean'; } },
  {
    name: 'nanvl', minArgs: 2, maxArgs: 2,
    resultType: (args) => { args.forEach((_, i) => requireNumeric('nanvl', args, i)); return 'double'; },
  },
  { name: 'zeroifnull', minArgs: 1, maxArgs: 1, resultType: (args) => { requireNumeric('zeroifnull', args, 0); return commonType('zeroifnull', [args[0]!.type, 'int']); } },
  { name: 'nullifzero', minArgs: 1, maxArgs: 1, resultType: (args) => { requireNumeric('nullifzero', args, 0); return args[0]!.type === 'null' ? 'int' : args[0]!.type; } },
];
