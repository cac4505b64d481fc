import type { ScalarFunctionImplementation } from './implementation.js';

/** String functions (signatures: lib/plan/function-catalog/string-signatures.ts). */
export const STRING_FUNCTIONS: readonly ScalarFunctionImplementation[] = [
  {
    // Spark's concat_ws: NULL separator gives NULL; NULL values (and NULL array elements) are skipped.
    name: 'concat_ws',
    compile: ([separator, ...values]) => (row) => {
      const sep = separator!(row);
      if (sep === null) return null;
      const parts: string[] = [];
      for (const value of values) {
        const v = value(row);
        if (v === null || v === undefined) continue;
        if (Array.isArray(v)) for (const x of v) { if (x !== null && x !== undefined) parts.push(String(x)); }
        else parts.push(String(v));
      }
      return parts.join(String(sep));
    },
  },
];
