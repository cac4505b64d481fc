/**
 * Spark's output modes: which result rows a trigger writes to the sink. Shared by the analyzer
 * (which modes a query shape allows), the operators (when to emit and evict), the sinks and the
 * query definition, so it lives below all of them.
 */
export type OutputMode = 'append' | 'update' | 'complete';
