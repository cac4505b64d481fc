/**
 * Checks of numeric construct props. A prop may be a deploy-time token (a CfnParameter, an
 * import): as a number it is a huge negative float (-1.888e+289), so it is checked only when
 * resolved, as aws-cdk-lib's own constructs do (`Token.isUnresolved`/`withResolved`). Props that
 * synth itself depends on must be known numbers, and say so.
 */
import { Token, Tokenization, type Duration } from 'aws-cdk-lib';

export function checkIntegerProp<P extends object>(
  props: P, name: keyof P & string, min: number, max: number | undefined, synthTimeOnly: string | undefined,
  error: (message: string) => Error,
): void {
  const value = props[name] as unknown;
  if (value === undefined) return;
  const range = max !== undefined ? `an integer from ${min} to ${max}` : min === 1 ? 'a positive integer' : `an integer of at least ${min}`;
  if (typeof value === 'number' && Token.isUnresolved(value)) {
    if (synthTimeOnly === undefined) return; // CloudFormation and the service check it at deploy time.
    throw error(`${name} is a deploy-time value (${describeToken(value)}), but it must be known at synth time: ${synthTimeOnly}. `
      + `Give ${range}, e.g. from context (app.node.tryGetContext) instead of a CfnParameter.`);
  }
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || (max !== undefined && value > max)) {
    throw error(`${name} must be ${range}, got ${typeof value === 'number' ? value : JSON.stringify(value)}.`);
  }
}

/** A token number as the user would recognise it: its reference (`${Token[BatchSize.Ref.12]}`). */
function describeToken(value: number): string {
  const reference = Tokenization.reverseNumber(value);
  return reference ? `token ${reference.toString()}` : 'a token';
}

/**
 * A Duration prop the construct converts at synth time (to milliseconds for the functions, or to
 * derive another setting): a deploy-time token cannot be converted, and CDK's own error would not
 * name the prop.
 */
export function checkSynthTimeDurationProp<P extends object>(
  props: P, name: keyof P & string, why: string, error: (message: string) => Error,
): void {
  const value = props[name] as Duration | undefined;
  if (value === undefined || !value.isUnresolved()) return;
  throw error(`${name} is a deploy-time value (${value.toString()}), but it must be known at synth time: ${why}. `
    + 'Give a Duration of known length (e.g. Duration.minutes(5), from context) instead of one built from a CfnParameter.');
}
