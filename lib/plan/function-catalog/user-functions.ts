import type { UserFunction } from '../user-function.js';

/**
 * UDFs registered by name for SQL text (`session.udf.register('slug', fn, 'string')`), looked up
 * when a call binds. One table per process, as the registrations of Spark's default session: a
 * query module registers its UDFs when it loads, so the Lambda that imports it has them.
 */
const REGISTERED = new Map<string, UserFunction>();

export function registerUserFunction(f: UserFunction): void {
  REGISTERED.set(f.name.toLowerCase(), f);
}

export function registeredUserFunction(name: string): UserFunction | undefined {
  return REGISTERED.get(name.toLowerCase());
}

export function unregisterUserFunction(name: string): boolean {
  return REGISTERED.delete(name.toLowerCase());
}
