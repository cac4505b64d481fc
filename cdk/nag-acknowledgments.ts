/**
 * cdk-nag (v3) rules the construct deliberately does not satisfy, acknowledged through CDK's
 * `Validations.of(scope).acknowledge({ id, reason })`: each one with the reason written down,
 * on the narrowest construct, and for IAM wildcard findings per finding (`AwsSolutions-IAM5[...]`).
 * No dependency on cdk-nag: only the rule ids and cdk-nag's way of naming a finding are needed.
 */
import { Stack, Validations } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';

export function acknowledge(scope: IConstruct, id: string, reason: string): void {
  if (reason.trim().length < 20) throw new Error(`a cdk-nag acknowledgment of ${id} needs a real reason, got '${reason}'`);
  Validations.of(scope).acknowledge({ id, reason });
}

/**
 * cdk-nag's name for a resource in an IAM finding (`Resource::<Bucket1234.Arn>/prefix/*`): the
 * resolved CloudFormation value with references flattened the way cdk-nag flattens them.
 */
export function iamResourceFinding(scope: IConstruct, resourceArn: string): string {
  return `Resource::${flattenCfnReference(Stack.of(scope).resolve(resourceArn))}`;
}

function flattenCfnReference(node: unknown): string {
  if (node === undefined) return '';
  if (typeof node === 'string') return node.replace(/\$\{/g, '<').replace(/\}/g, '>');
  const value = node as Record<string, unknown>;
  if (value['Fn::Join']) {
    const [delimiter, items] = value['Fn::Join'] as [string, unknown[]];
    return items.map(flattenCfnReference).join(delimiter);
  }
  if (value['Fn::Sub']) return flattenCfnReference(value['Fn::Sub']);
  if (value['Fn::GetAtt']) {
    const [resource, attribute] = value['Fn::GetAtt'] as [unknown, unknown];
    return `<${flattenCfnReference(resource)}.${flattenCfnReference(attribute)}>`;
  }
  if (value['Fn::ImportValue']) return flattenCfnReference(value['Fn::ImportValue']);
  if (value.Ref) return `<${flattenCfnReference(value.Ref)}>`;
  return JSON.stringify(node);
}
